package datadriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/datacodec"
)

// pstate is where a profile is in its life on this Node.
type pstate int

const (
	stateActive   pstate = iota // a live session
	stateLeaving                // Release called: cleanups and the release save are running
	stateRetained               // the release save failed; the lock may still be ours; retried
	stateAdopting               // a rejoin is re-asserting a retained profile
	stateClosed                 // released, lost or dropped: no longer live
)

func (s pstate) String() string {
	return [...]string{"active", "leaving", "retained", "adopting", "closed"}[s]
}

// Profile is one loaded profile, live under its session lock until it is
// released or its lock is lost. Its methods are safe for concurrent use.
//
// Lock order: saveLock (the profile's save slot, the only one held across
// a Redis round trip), then dataMu (the data, held for CPU work only), then
// Driver.mu (the driver's and every profile's state, held briefly, never
// across I/O or a game callback). Nothing waits for saveLock while holding
// dataMu or Driver.mu.
type Profile[T any] struct {
	d   *Driver[T]
	key string

	dataMu sync.RWMutex
	data   T
	// unknown is what the stored data holds that T does not know (a newer
	// build's fields): written back with every save.
	unknown *datacodec.Unknown
	// applied are the ids of inbox messages applied to data that no landed
	// save has written yet: the next save deletes them from the inbox.
	applied []string
	uids    []string
	meta    map[string]string
	// metaGen counts changes of uids and meta; metaSaved is the count the
	// last landed save wrote.
	metaGen, metaSaved uint64
	// gate is set while a trade of the profile runs (Update waits for it to
	// close); unsettled is a trade whose outcome is not in the record yet.
	gate      chan struct{}
	unsettled *pendingTrade

	// saveLock serializes saves and releases (a one-slot semaphore, so a
	// waiting save can give up with its context).
	saveLock chan struct{}
	// Guarded by saveLock:
	ver      int64  // the record version our last landed write made or loaded
	lastData []byte // the data of that version: an unchanged profile saves no data
	// schema and schemaMin are the record's schema version and min-reader,
	// as loaded or as our last landed write set them.
	schema, schemaMin int
	// histAt is when the record last kept a version (Redis clock); redisNow
	// is the Redis time the load saw, at local time loadedAt: together they
	// tell when the next version is due.
	histAt, redisNow, loadedAt time.Time

	ctx    context.Context // cancelled when the profile stops being live
	cancel context.CancelFunc
	done   chan struct{}

	autosaveTimer *clock.Timer // guarded by d.mu
	keeper        *clock.Timer // guarded by d.mu: refreshes the lock, ends the session at its age deadline

	// Guarded by d.mu:
	state   pstate
	token   string   // the lock token
	earlier []string // tokens the lock may still carry while an adoption has not landed
	epoch   int64
	// leaseGen is the presence lease generation the lock was taken under (0:
	// the lock carries no presence flag); ageUntil is when the lock could be
	// taken by age: the send time of its last landed write plus LockTTL. The
	// session ends when either passes (lease.go).
	leaseGen uint64
	ageUntil time.Time
	// corrupt is set on a profile loaded for RestoreAt whose stored data
	// does not decode: it never writes its data, only a restored version.
	corrupt bool
	// inboxSeq is how many messages were ever sent to the profile, as the
	// last load or save saw it; seenSeq what the last pull saw. pulling is
	// set while a pull runs, pullAgain when a notification came meanwhile.
	inboxSeq, seenSeq  int64
	pulling, pullAgain bool
	keepNext           bool      // the next data write keeps the data it replaces (a restore)
	refreshing         bool      // a lock refresh is running
	refreshRetry       time.Time // no refresh before this (one failed)
	saving             bool
	cleanups           []func(*T)
	err                error
}

// Key is the profile's key.
func (p *Profile[T]) Key() string { return p.key }

// Epoch is the fencing token of the profile's lock: it grows by one with
// every acquisition of the key, so a system that records the highest epoch
// it has seen can refuse writes from an older holder.
func (p *Profile[T]) Epoch() int64 {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return p.epoch
}

// Done is closed when the profile stops being live: after a release, when
// its lock is lost, or when the Node closes. Err then says why.
func (p *Profile[T]) Done() <-chan struct{} { return p.done }

// Err is nil while the profile is live; after Done it matches ErrReleased,
// ErrLockLost or ErrClosed.
func (p *Profile[T]) Err() error {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	return p.err
}

// View calls fn with the data under a read lock. fn must not keep the
// pointer or call other methods of p.
func (p *Profile[T]) View(fn func(d *T)) {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	fn(&p.data)
}

// Update calls fn with the data under the write lock, when the profile is
// live; the change is saved by the next save. It returns an error matching
// ErrReleased or ErrLockLost, without calling fn, once the player has left
// or the lock is lost, and ErrLockLost (with ErrFenced) once this server can
// no longer prove the lock is its own (see ErrFenced): that check is made
// before fn runs and again after, so an Update that returns nil was made
// while nobody else could hold the lock. While a trade of the profile runs
// it waits for it; while a trade's outcome is unknown
// (ErrTradeOutcomeUnknown) it returns ErrTradePending. A panic in fn is
// recovered: the session ends (Kick with ReasonCallbackFailed, Err and the
// returned error matching ErrCallbackPanic) and the half made change never
// lands; the lock is given back with the last landed save. fn must not keep
// the pointer or call other methods of p.
func (p *Profile[T]) Update(fn func(d *T)) error {
	p.dataMu.Lock()
	for p.gate != nil { // a trade of this profile is running
		g := p.gate
		p.dataMu.Unlock()
		<-g
		p.dataMu.Lock()
	}
	defer p.dataMu.Unlock()
	if err := p.liveErr(); err != nil {
		return err
	}
	if err := p.syncTradeLocked(); err != nil {
		return err
	}
	if err := protect("Update", func() { fn(&p.data) }); err != nil {
		// The change is half made: the session ends without it, and the
		// record keeps its last landed save.
		p.d.logPanic(p.key, err)
		p.d.mu.Lock()
		p.d.dropLocked(p, err, ReasonCallbackFailed)
		p.d.mu.Unlock()
		return err
	}
	return p.liveErr()
}

// liveErr is nil when the profile takes updates: it is live and its lease
// holds.
func (p *Profile[T]) liveErr() error {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	switch p.state {
	case stateActive:
		if err := p.checkLeaseLocked(); err != nil {
			return err
		}
		return nil
	case stateClosed:
		return p.err
	}
	return ErrReleased
}

// OnRelease registers a leave cleanup: fn runs with the data under the write
// lock when the profile is released (by Release, a handoff to another
// server, or Node.Close), before the release save, so what it changes is
// saved. Cleanups run once, in registration order; a rejoin that adopts the
// profile starts with none.
func (p *Profile[T]) OnRelease(fn func(d *T)) {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.cleanups = append(p.cleanups, fn)
}

// SetUserIDs records the users whose personal data the profile holds (for
// erasure requests); saved with the next save.
func (p *Profile[T]) SetUserIDs(ids ...string) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	p.uids = append([]string(nil), ids...)
	p.metaGen++
}

// UserIDs returns the user ids recorded on the profile.
func (p *Profile[T]) UserIDs() []string {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	return append([]string(nil), p.uids...)
}

// SetMeta sets one metadata entry kept on the record beside the data;
// saved with the next save.
func (p *Profile[T]) SetMeta(name, value string) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	if p.meta == nil {
		p.meta = make(map[string]string)
	}
	p.meta[name] = value
	p.metaGen++
}

// Meta returns a copy of the profile's metadata.
func (p *Profile[T]) Meta() map[string]string {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	m := make(map[string]string, len(p.meta))
	for k, v := range p.meta {
		m[k] = v
	}
	return m
}

// snapshot is what a save writes, taken at one instant: the encoded data,
// the user ids and metadata when they changed since the last landed save
// (nil otherwise) with their change count, and the ids of the messages the
// data has applied.
type snapshot struct {
	data, uids, meta []byte
	metaGen          uint64
	applied          []string
}

// snapshot takes what a save writes.
func (p *Profile[T]) snapshot() (snapshot, error) {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	s := snapshot{metaGen: p.metaGen, applied: slices.Clone(p.applied)}
	var err error
	if s.data, err = p.d.codec.Encode(&p.data, p.unknown); err != nil || s.metaGen == p.metaSaved {
		return s, err
	}
	if s.uids, err = msgpack.Marshal(p.uids); err != nil {
		return s, err
	}
	s.meta, err = msgpack.Marshal(p.meta)
	return s, err
}

// runCleanups runs the registered leave cleanups once.
//
// A cleanup that panics leaves the data as it was before the cleanups ran
// (a copy is taken first), so the release saves no half made change; the
// panic comes back as an error matching ErrCallbackPanic.
func (p *Profile[T]) runCleanups() error {
	p.d.mu.Lock()
	fns := p.cleanups
	p.cleanups = nil
	p.d.mu.Unlock()
	if len(fns) == 0 {
		return nil
	}
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	before, err := p.d.codec.Clone(&p.data)
	if err != nil {
		return fmt.Errorf("leave cleanups of %q: copy the data: %w", p.key, err)
	}
	for _, fn := range fns {
		if err := protect("OnRelease", func() { fn(&p.data) }); err != nil {
			p.data = before
			p.d.logPanic(p.key, err)
			return err
		}
	}
	return nil
}

// finish ends the profile with err (ErrReleased, ErrLockLost, ErrClosed).
func (p *Profile[T]) finish(err error) {
	p.d.mu.Lock()
	lost := p.finishLocked(err)
	p.d.mu.Unlock()
	if lost {
		p.d.lockLost(p.key, err)
	}
}

// finishLocked ends the profile; it reports whether the end is a lock loss
// that callbacks must hear of. d.mu must be held.
func (p *Profile[T]) finishLocked(err error) bool {
	if p.state == stateClosed {
		return false
	}
	p.state = stateClosed
	p.err = err
	if p.d.profiles[p.key] == p {
		delete(p.d.profiles, p.key)
	}
	p.d.notify(p.key)
	p.stopAutosaveLocked()
	if p.keeper != nil {
		p.keeper.Stop()
	}
	p.cancel()
	close(p.done)
	return errors.Is(err, ErrLockLost)
}

// lockSave takes the profile's save slot.
func (p *Profile[T]) lockSave(ctx context.Context) error {
	select {
	case p.saveLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Profile[T]) unlockSave() { <-p.saveLock }

// decodeMeta loads the user ids and metadata stored on the record.
func (p *Profile[T]) decodeMeta(uids, meta []byte) error {
	if len(uids) > 0 {
		if err := msgpack.Unmarshal(uids, &p.uids); err != nil {
			return fmt.Errorf("user ids: %w", err)
		}
	}
	if len(meta) > 0 {
		if err := msgpack.Unmarshal(meta, &p.meta); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
	}
	return nil
}
