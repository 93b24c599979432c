package datadriver

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/record"
)

// The target's side of a move. A prepare that passes its checks is
// accepted under a new lock token and kept pending, one per key; once the
// source's flip lands (its commit says so, or the record does) the profile
// is built from what the prepare carried, with no Redis command, and held
// live for its player's Join up to MoveHold. A pending move is dropped only
// once the record proves the flip can no longer land (its expiry passed on
// the Redis clock and the lock is not ours), so no lock is ever left on
// this server that no profile answers for.

const (
	// maxMoveWindow bounds a prepare's window (expiry minus now): a longer
	// one is refused, so a forged prepare holds a key here no longer.
	maxMoveWindow = time.Minute
	// moveResolveMargin is how long after a pending move's expiry (as the
	// prepare reckoned it) its target reads the record when no commit came.
	moveResolveMargin = 100 * time.Millisecond
	// moveRetry is how soon a failed read of a pending move is tried again.
	moveRetry = 500 * time.Millisecond
)

// movesIn are the moves to this driver, by key. d.mu guards them.
type movesIn[T any] struct {
	pending map[string]*moveIn[T]
	held    map[string]*heldMove[T]
	// out are the moves in flight from here, by key (move_status.go).
	out map[string]moveOut
	// hook, set by tests only (SetMoveHook), is called at each point of a
	// move this driver's profiles make.
	hook func(point string)
}

// The points of a move a test hook sees, in order.
const (
	movePrepared = "prepared" // the prepare is built, not sent
	moveAccepted = "accepted" // the target accepted; the flip is not sent
	moveFlipped  = "flipped"  // the flip landed; the commit is not sent
)

// moveHook calls the test hook at point, if one is set.
func (d *Driver[T]) moveHook(point string) {
	d.mu.Lock()
	h := d.moves.hook
	d.mu.Unlock()
	if h != nil {
		h(point)
	}
}

// moveIn is a move this driver accepted and whose flip it has not seen.
type moveIn[T any] struct {
	m          moveMsg      // the prepare
	accept     moveMsg      // the answer (a repeated prepare gets it again)
	gen        uint64       // the presence lease generation the lock lives under
	dec        movedData[T] // the data, decoded once the flip landed
	acceptedAt time.Time    // local: the flip lands after it
	timer      *clock.Timer
	resolved   chan struct{} // closed once it is installed or dropped
	// releaseAsked: another server asked for the lock it would hold;
	// probed: a join read the record early (once).
	releaseAsked, probed bool
}

// heldMove is a profile moved here that its player has not joined yet.
type heldMove[T any] struct {
	p     *Profile[T]
	timer *clock.Timer // MoveHold
}

// flipState is the record just after a move's flip, as the commit or a
// read of the record tells it.
type flipState struct {
	ver, epoch, inboxSeq int64
	at, lockAt           time.Time
}

// movePrepare answers a prepare (on the bus's delivery goroutine: no I/O).
func (d *Driver[T]) movePrepare(m moveMsg, signed bool) moveMsg {
	switch {
	case m.To != d.node.jobID:
		return refusal(m, RefusedNotAddressed, "this server is "+d.node.jobID)
	case len(d.node.cfg.RequestKey) > 0 && !signed:
		return refusal(m, RefusedUnsigned, "this server accepts only signed moves")
	case m.Window <= 0 || m.Window > maxMoveWindow.Milliseconds():
		return refusal(m, RefusedExpired, fmt.Sprintf("window %d ms", m.Window))
	case m.SchemaMin > d.codec.Version():
		return refusal(m, RefusedSchema, fmt.Sprintf("the data needs schema version %d, this driver's is %d",
			m.SchemaMin, d.codec.Version()))
	case m.Schema < 0 || m.Schema > record.MaxSchema || m.SchemaMin < 0:
		return refusal(m, RefusedBadData, fmt.Sprintf("schema %d, min-reader %d: not numbers this library writes",
			m.Schema, m.SchemaMin))
	}
	if ans, ok := d.repeatedPrepare(m); ok {
		return ans
	}
	if err := wellFormed(m.Data); err != nil { // decoded once the flip landed (move_decode.go)
		return refusal(m, RefusedBadData, err.Error())
	}
	var probe Profile[T]
	if err := probe.decodeMeta(m.UIDs, m.Meta); err != nil {
		return refusal(m, RefusedBadData, "user ids and metadata: "+err.Error())
	}
	gen, err := d.awaitLease(d.ctx, time.Time{}, false)
	if err != nil {
		return refusal(m, RefusedNoLease, err.Error())
	}
	token, err := d.node.newToken()
	if err != nil {
		return refusal(m, RefusedNoLease, err.Error())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ans, ok := d.repeatedPrepareLocked(m); ok {
		return ans
	}
	switch {
	case d.closed:
		return refusal(m, RefusedClosing, "the driver is closed")
	case d.profiles[m.Key] != nil || d.loading[m.Key]:
		return refusal(m, RefusedHeld, "this server has the key already")
	}
	in := &moveIn[T]{m: m, gen: gen, acceptedAt: d.node.clock.Now(), resolved: make(chan struct{})}
	in.accept = moveMsg{Step: stepAccept, ID: m.ID, Driver: m.Driver, Key: m.Key, To: m.From, Token: token}
	in.accept.Presence = d.presenceFlag()
	if d.moves.pending == nil {
		d.moves.pending = make(map[string]*moveIn[T])
		d.moves.held = make(map[string]*heldMove[T])
	}
	d.moves.pending[m.Key] = in
	window := time.Duration(m.Window) * time.Millisecond
	in.timer = d.node.clock.AfterFunc(window+moveResolveMargin, func() { d.resolveMove(in) })
	d.log.Debug("move accepted", "key", m.Key, "from", m.From, "move", m.ID)
	return in.accept
}

// repeatedPrepare is repeatedPrepareLocked under d.mu.
func (d *Driver[T]) repeatedPrepare(m moveMsg) (moveMsg, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.repeatedPrepareLocked(m)
}

// repeatedPrepareLocked answers a prepare of a key with a move pending:
// the same accept for the same move (idempotent), a refusal for another.
// d.mu held.
func (d *Driver[T]) repeatedPrepareLocked(m moveMsg) (moveMsg, bool) {
	in := d.moves.pending[m.Key]
	switch {
	case in == nil:
		return moveMsg{}, false
	case in.m.ID == m.ID && in.m.From == m.From:
		return in.accept, true
	}
	return refusal(m, RefusedBusy, "another move of the key is pending here"), true
}

// moveCommit installs the profile of a pending move whose source says its
// flip landed (the commit names the move and the token it was accepted
// under).
func (d *Driver[T]) moveCommit(m moveMsg) {
	d.mu.Lock()
	in := d.moves.pending[m.Key]
	d.mu.Unlock()
	if in == nil || in.m.ID != m.ID || in.accept.Token != m.Token || in.m.From != m.From {
		return // late, repeated or forged
	}
	_ = in.decode(d.codec) // outside the lock; installLocked reads the outcome
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moves.pending[m.Key] != in {
		return // resolved meanwhile
	}
	d.installLocked(in, flipState{ver: m.Ver, epoch: m.Epoch, inboxSeq: m.InboxSeq, at: time.UnixMilli(m.At),
		lockAt: time.UnixMilli(m.LockAt)})
}

// resolveMove reads the record of a pending move whose commit did not come
// by its expiry: the lock ours, the flip landed (the profile is
// installed); the expiry passed on the Redis clock with the lock not ours,
// it never will (the move is dropped); else it reads again later.
func (d *Driver[T]) resolveMove(in *moveIn[T]) {
	key := in.m.Key
	d.mu.Lock()
	live := d.moves.pending[key] == in
	d.mu.Unlock()
	if !live || d.ctx.Err() != nil {
		return
	}
	ctx, cancel := d.node.clock.WithTimeout(d.ctx, d.node.cfg.SaveTimeout)
	st, err := record.ReadMoveState(ctx, d.node.rdb, d.recordKey(key))
	cancel()
	if err == nil && st.Token == in.accept.Token {
		_ = in.decode(d.codec) // outside the lock; installLocked reads the outcome
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moves.pending[key] != in {
		return
	}
	switch {
	case err != nil:
		d.log.Warn("could not read a pending move's record; retrying", "key", key, "move", in.m.ID, "err", err)
		in.timer.Reset(moveRetry)
	case st.Token == in.accept.Token:
		d.log.Info("a move's commit did not come; the record says its flip landed", "key", key, "move", in.m.ID)
		d.installLocked(in, flipState{ver: st.Ver, epoch: st.Epoch, inboxSeq: st.InboxSeq, at: st.At, lockAt: st.Now})
	case st.Now.UnixMilli() > in.m.Expiry || st.Job != in.m.From:
		// Past the expiry the flip never lands; and a lock no longer the
		// source's never carries the source's token again (a forged or
		// stale prepare holds the key here no longer).
		d.log.Info("a move accepted here cannot flip any more; dropped", "key", key, "move", in.m.ID,
			"from", in.m.From, "holder", st.Job)
		d.dropLocked(in)
	default:
		in.timer.Reset(time.Duration(in.m.Expiry-st.Now.UnixMilli())*time.Millisecond + moveResolveMargin)
	}
}

// dropLocked forgets a pending move. d.mu held.
func (d *Driver[T]) dropLocked(in *moveIn[T]) {
	delete(d.moves.pending, in.m.Key)
	in.timer.Stop()
	close(in.resolved)
	d.notify(in.m.Key)
}

// installLocked makes the profile of a move whose flip landed live here,
// held for its player's Join (MoveHold); d.mu held. A driver shutting down
// leaves it to settleMoves.
func (d *Driver[T]) installLocked(in *moveIn[T], st flipState) {
	if d.closed {
		return
	}
	d.dropLocked(in)
	if err := in.decode(d.codec); err != nil {
		// The flip landed: the record holds the source's bytes, which this
		// driver cannot read. No profile is built; the lock is given back.
		d.log.Error("a moved profile's data does not decode here; its lock is given back (the data stays in the record)",
			"key", in.m.Key, "from", in.m.From, "move", in.m.ID, "err", err)
		token := in.accept.Token
		d.goTracked(func() { d.giveBack(in.m.Key, token, nil) })
		return
	}
	p := d.movedProfile(in, st)
	if err := p.leaseErr(d.node.clock.Now()); err != nil {
		// The lease lapsed since the accept: another server may take the
		// lock; the profile is not safe to use. Ended here, under d.mu
		// (endWith would take it again): the end gives the lock back in the
		// background, as for any session that may still hold it.
		p.endLocked(causeClosed, ErrClosed)
		return
	}
	key := in.m.Key
	d.profiles[key] = p
	p.startLocked()
	if in.releaseAsked {
		// Another server asked for it before it was here: its executor
		// releases it, and no join here is handed it meanwhile.
		p.askLeave(causeJoinedElsewhere, p.view().gen)
		return
	}
	h := &heldMove[T]{p: p}
	h.timer = d.node.clock.AfterFunc(d.cfg.MoveHold, func() { d.unclaimed(key, h) })
	d.moves.held[key] = h
	d.log.Info("profile moved here; held for its player's join", "key", key, "from", in.m.From, "move", in.m.ID,
		"epoch", st.epoch)
}

// movedProfile builds the profile of a move whose flip landed, from the
// prepare and the record after the flip.
func (d *Driver[T]) movedProfile(in *moveIn[T], st flipState) *Profile[T] {
	m := in.m
	now := d.node.clock.Now()
	p := &Profile[T]{
		d: d, key: m.Key, data: in.dec.data,
		leaseGen: leaseGenOf(in.gen),
		w: writer{ver: st.ver, data: d.dig.storedOf(m.Data), schema: int32(m.Schema), schemaMin: int32(m.SchemaMin),
			stored: metaOf(record.KeptMeta{At: st.at, Schema: m.Schema, SchemaMin: m.SchemaMin}),
			histAt: wallNS(msOrZero(m.HistAt)), redis: d.redisClockOf(st.lockAt, now)},
	}
	p.w.setInboxSeqs(st.inboxSeq, m.SeenSeq)
	p.setUnknown(in.dec.unknown)
	p.w.setStored(m.UIDs, m.Meta)
	p.initLife(in.accept.Token, st.epoch)
	p.touch(in.acceptedAt)           // the flip's lock.at is later
	_ = p.decodeMeta(m.UIDs, m.Meta) // checked at the prepare
	return p
}

// msOrZero is ms as a time, zero for 0.
func msOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// unclaimed releases a moved profile whose player did not join within
// MoveHold, like a leave.
func (d *Driver[T]) unclaimed(key string, h *heldMove[T]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moves.held[key] != h {
		return
	}
	delete(d.moves.held, key)
	if h.p.phaseNow() == phaseLive {
		d.log.Info("a moved profile's player did not join within MoveHold; releasing it", "key", key)
		h.p.askLeave(causeMoveUnclaimed, h.p.view().gen)
	}
}

// claimMoved hands a Join the profile moved here for key, with no Redis
// command: at once when it is held, after the move settles when it is
// pending (the record is read once at the join then, in case the commit
// was lost). It answers nil (and no error) when no move of key is here.
func (d *Driver[T]) claimMoved(ctx context.Context, key string) (*Profile[T], error) {
	for {
		d.mu.Lock()
		if h := d.moves.held[key]; h != nil {
			delete(d.moves.held, key)
			h.timer.Stop()
			if h.p.phaseNow() == phaseLive {
				d.mu.Unlock()
				return h.p, nil
			}
		}
		in := d.moves.pending[key]
		if in != nil && !in.probed {
			// The player is here: read the record now rather than at the
			// expiry, in case the commit was lost (one read; the commit
			// installs the profile all the same if it comes first).
			in.probed = true
			in.timer.Reset(0)
		}
		d.mu.Unlock()
		if in == nil {
			return nil, nil
		}
		select {
		case <-in.resolved:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.loads.Done():
			return nil, errClosing
		}
	}
}

// moveReleaseLocked answers another server's request for the lock a
// pending move would hold (it read the flip's token before the commit
// came): the request is answered once the move settles and, if it landed,
// once the profile has been released. ok is false when no move of key is
// pending under token. d.mu held.
func (d *Driver[T]) moveReleaseLocked(key, token, purpose string) (_ <-chan struct{}, ok bool) {
	in := d.moves.pending[key]
	if in == nil || in.accept.Token != token {
		return nil, false
	}
	in.releaseAsked = true
	out := make(chan struct{})
	if !d.goTracked(func() {
		defer close(out)
		select {
		case <-in.resolved:
		case <-d.ctx.Done():
			return
		}
		d.mu.Lock()
		released := d.releaseLocked(key, token, purpose)
		d.mu.Unlock()
		select {
		case <-released:
		case <-d.ctx.Done():
		}
	}) {
		close(out)
	}
	return out, true
}

// settleMoves ends the moves pending here when the driver shuts down: each
// is resolved from the record (waiting out its expiry, bounded by ctx), and
// a flip that landed is given back (its data is in the record). The held
// profiles are released with the others.
func (d *Driver[T]) settleMoves(ctx context.Context) {
	d.mu.Lock()
	var pending []*moveIn[T]
	for _, in := range d.moves.pending {
		in.timer.Stop()
		pending = append(pending, in)
	}
	for key, h := range d.moves.held {
		h.timer.Stop()
		delete(d.moves.held, key)
	}
	d.mu.Unlock()
	for _, in := range pending {
		d.settleMove(ctx, in)
		d.mu.Lock()
		if d.moves.pending[in.m.Key] == in {
			d.dropLocked(in)
		}
		d.mu.Unlock()
	}
}

// settleMove resolves one pending move at shutdown.
func (d *Driver[T]) settleMove(ctx context.Context, in *moveIn[T]) {
	key := in.m.Key
	for ctx.Err() == nil {
		rctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
		st, err := record.ReadMoveState(rctx, d.node.rdb, d.recordKey(key))
		cancel()
		wait := moveRetry
		switch {
		case err != nil:
		case st.Token == in.accept.Token:
			d.giveBackOnce(key, in.accept.Token, nil)
			return
		case st.Now.UnixMilli() > in.m.Expiry || st.Job != in.m.From:
			return
		default:
			wait = time.Duration(in.m.Expiry-st.Now.UnixMilli())*time.Millisecond + moveResolveMargin
		}
		t := d.node.clock.Timer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			d.log.Warn("shutdown: a move to this server did not settle in time; if its flip lands, the lock "+
				"stays until this server's presence expires", "key", key, "move", in.m.ID)
		case <-t.C:
		}
	}
}

// MoveHeld reports whether a profile moved to this Node (Profile.MoveTo on
// another) waits for its player here: its flip landed, and a Join of key
// now returns it without a Redis command. A game can tell its matchmaker
// the player is expected; false once joined, released (MoveHold) or
// handed on.
func (d *Driver[T]) MoveHeld(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.moves.held[key]
	return h != nil && h.p.phaseNow() == phaseLive
}
