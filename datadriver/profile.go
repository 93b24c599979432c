package datadriver

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/deadlines"
)

// Profile is one loaded profile, live under its session lock until it is
// released or its session ends otherwise. Its methods are safe for
// concurrent use.
type Profile[T any] struct {
	d   *Driver[T]
	key string

	// The game's side.
	dataMu sync.RWMutex
	data   T
	// ext is what few sessions use (extras.go): nil until first set.
	ext atomic.Pointer[extras[T]]
	// updates counts the Updates that succeeded (Profile.Updates), changed
	// under dataMu; lastSaved is the last landed write (landed.go).
	updates   atomic.Uint64
	lastSaved atomic.Pointer[landing]
	// state: stopped is set (under dataMu) once nothing more of the
	// session's data may be written (a change failed halfway, a panic, or
	// after its lease lapsed, or the session ended; every write's snapshot
	// checks it); kicked once the game heard its one Kick.
	state profileState
	// leaseGen is the presence lease generation the lock lives under (0:
	// no presence flag); beside state, one word. A generation past 32 bits
	// (never reached) is held as one the lease never has again: the
	// session fences itself.
	leaseGen uint32
	// Its life (life.go): the executor is the one writer of life (the
	// epoch among it); ended is set once, by whoever ends the profile.
	life  atomic.Pointer[lifeView]
	ended atomic.Pointer[ending]
	// lastSent is when the last landed write was sent (an instant; only
	// grows): the lock could be taken by age LockTTL later (ageUntil), and
	// the age fence ends the session then, on the driver's timers (timer);
	// a refresh is due LockTTL/2 after it (refreshAt). Written by the
	// executor, read by the timer too.
	lastSent atomic.Int64
	// done is the Done channel, made when first asked for (as a
	// context.Context's is): a resident profile nobody watches has none.
	// Made and closed under d.mu (doneLocked, endLocked).
	done atomic.Pointer[chan struct{}]

	// Its writes: the executor's (owner.go).
	w  writer
	mb mailbox // the executor's queue
	// timer is the profile's one deadline on the driver's timers: the
	// tick of the autosave and the lock refresh, or the age fence when
	// that comes first (owner.go: rearm, timerFired).
	timer deadlines.Entry
}

// writer is the executor's state: what the profile's writes know of
// the record.
type writer struct {
	ver  int64      // the record version the last landed write made or loaded
	data storedData // what it knows of the data of that version: an unchanged profile saves no data
	// schema and schemaMin are the schema version and min-reader of the
	// data in memory: as loaded or as the last landed write set them, or a
	// restored version's.
	schema, schemaMin int32 // within record.MaxSchema
	// seq numbers the profile's writes (record.SaveArgs.Seq): the last one
	// built. Redis refuses a write below the highest that landed, so one
	// delivered late never puts older data over newer.
	seq uint32
	// stored is the stored data's write time, schema and
	// min-reader, as loaded or as the last landed write stamped them: what
	// a version kept of it says.
	stored storedMeta
	// histAt is when the record last kept a version (Redis clock); redis is
	// the Redis clock as the load read it: together they tell when the next
	// version is due. keepNext: the next data write keeps the data it
	// replaces (a restore).
	histAt int64 // wallNS
	redis  redisClock
	// autosaveAt is when the next autosave is due.
	autosaveAt instant
	// x is what few sessions use (extras.go): nil until first set. Its
	// flags (writerFlag, has and set): the next data write keeps the data
	// it replaces (flagKeepNext, see histAt), the data does not decode
	// (flagCorrupt), the broken keys logged already.
	x *writerExtras
}

// nextSeq numbers the next write of the profile (record.SaveArgs.Seq). At
// the last number it stays there (a write numbered as the last one landed
// still lands): the count never wraps to below the record's.
func (w *writer) nextSeq() int64 {
	if w.seq < math.MaxUint32 {
		w.seq++
	}
	return int64(w.seq)
}

// profileState is a profile's two one-way bits, in one word: stopped and
// kicked.
type profileState struct{ v atomic.Uint32 }

const (
	stateStopped uint32 = 1 << iota
	stateKicked
)

// stopped reports whether nothing more of the session's data may be
// written.
func (s *profileState) stopped() bool { return s.v.Load()&stateStopped != 0 }

// stop sets stopped.
func (s *profileState) stop() { s.v.Or(stateStopped) }

// kickOnce sets kicked and reports whether it was not set before.
func (s *profileState) kickOnce() bool { return s.v.Or(stateKicked)&stateKicked == 0 }

// unkick clears kicked (an adopted session may hear a Kick again).
func (s *profileState) unkick() { s.v.And(^stateKicked) }

// Key is the profile's key.
func (p *Profile[T]) Key() string { return p.key }

// Epoch is the fencing token of the profile's lock: it grows by one with
// every acquisition of the key, so a system that records the highest epoch
// it has seen can refuse writes from an older holder.
func (p *Profile[T]) Epoch() int64 { return p.view().epoch }

// Done is closed when the profile stops being live: after a release, when
// its lock is lost, or when the Node closes. Err then says why.
func (p *Profile[T]) Done() <-chan struct{} {
	if c := p.done.Load(); c != nil {
		return *c
	}
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return p.doneLocked()
}

// doneLocked is Done with d.mu held: the channel, made now if nobody asked
// for it yet (closed already once the profile has ended).
func (p *Profile[T]) doneLocked() <-chan struct{} {
	if c := p.done.Load(); c != nil {
		return *c
	}
	if p.ended.Load() != nil {
		return closed
	}
	c := make(chan struct{})
	p.done.Store(&c)
	return c
}

// Err is nil while the profile is live; after Done it matches ErrReleased,
// ErrLockLost or ErrClosed.
func (p *Profile[T]) Err() error {
	if e := p.ended.Load(); e != nil {
		return e.err
	}
	return nil
}

// View calls fn with the data under a read lock. fn must not keep the
// pointer or call other methods of p.
func (p *Profile[T]) View(fn func(d *T)) {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	fn(&p.data)
}

// Update calls fn with the data under the write lock while the session is
// live: nil means the change is in the next landed write or the session
// reports its loss (Done, Err); an error means no server will load any of
// it: ErrReleased, ErrLockLost (with ErrFenced when this server cannot prove
// the lock is its own), ErrTradePending, or fn's panic (ErrCallbackPanic,
// and the session ends). fn must not keep the pointer or call p's methods.
func (p *Profile[T]) Update(fn func(d *T)) error {
	p.dataMu.Lock()
	p.waitTradeLocked()
	if err := p.updatable(); err != nil {
		p.dataMu.Unlock()
		p.fenceOn(err)
		return err
	}
	if err := p.syncTradeLocked(); err != nil {
		p.dataMu.Unlock()
		return err
	}
	perr := protect("Update", func() { fn(&p.data) })
	lerr := p.leaseErr(p.d.node.clock.Now())
	if perr != nil || lerr != nil {
		// No write may take the change: every snapshot checks stopped.
		p.state.stop()
	}
	if perr == nil && lerr == nil {
		p.updates.Add(1)
	}
	p.dataMu.Unlock()
	switch {
	case perr != nil:
		p.d.logPanic(p.key, perr)
		p.endWith(causeCallbackFailed, perr)
		return perr
	case lerr != nil:
		p.fenceOn(lerr)
		return lerr
	}
	return nil
}

// waitTradeLocked waits, with dataMu held (it lets go while it waits),
// until no trade of the profile runs.
func (p *Profile[T]) waitTradeLocked() {
	for g := p.extras().tradeGate(); g != nil; g = p.extras().tradeGate() {
		p.dataMu.Unlock()
		<-g
		p.dataMu.Lock()
	}
}

// OnRelease registers a leave cleanup: fn runs with the data before the
// release save (Release, a handoff, Node.Close), so what it changes is saved;
// once, in order, and only for a release that will try to save. An adoption
// starts with none.
func (p *Profile[T]) OnRelease(fn func(d *T)) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	x := p.extrasMade()
	x.cleanups = append(x.cleanups, fn)
}

// SetUserIDs records the users whose personal data the profile holds (for
// erasure requests); saved with the next save.
func (p *Profile[T]) SetUserIDs(ids ...string) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	x := p.extrasMade()
	x.uids = append([]string(nil), ids...)
	x.metaGen++
}

// UserIDs returns the user ids recorded on the profile.
func (p *Profile[T]) UserIDs() []string {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	if x := p.extras(); x != nil {
		return append([]string(nil), x.uids...)
	}
	return nil
}

// SetMeta sets one metadata entry kept on the record beside the data;
// saved with the next save.
func (p *Profile[T]) SetMeta(name, value string) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	x := p.extrasMade()
	if x.meta == nil {
		x.meta = make(map[string]string)
	}
	x.meta[name] = value
	x.metaGen++
}

// Meta returns a copy of the profile's metadata.
func (p *Profile[T]) Meta() map[string]string {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	x := p.extras()
	if x == nil {
		return map[string]string{}
	}
	m := make(map[string]string, len(x.meta))
	for k, v := range x.meta {
		m[k] = v
	}
	return m
}

// decodeMeta loads the user ids and metadata stored on the record.
func (p *Profile[T]) decodeMeta(uids, meta []byte) error {
	if len(uids) > 0 {
		if err := msgpack.Unmarshal(uids, &p.extrasMade().uids); err != nil {
			return err
		}
	}
	if len(meta) > 0 {
		return msgpack.Unmarshal(meta, &p.extrasMade().meta)
	}
	return nil
}
