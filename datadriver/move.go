package datadriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// A move (seeds 000 and 004): the source hands the live session, with its
// data, straight to a chosen server over the bus, and flips the lock from
// its token to the target's in one fenced script, so that no moment has
// two owners or none.
//
//	source (executor;        Updates wait)    target
//	  prepare{id, expiry, data} ───────────▶  checks; keeps one pending move per key
//	  ◀──────────────── accept{id, token}     (a repeated prepare: the same accept)
//	  move.lua: lock source→target, data,
//	  epoch+1, move.* = COMMITTED             (the commit point)
//	  session ends: ErrMoved
//	  commit{id, token, ver, epoch} ───────▶  the profile is live here, held for
//	                                          its player's Join (no Redis command)
//
// Every failure before the flip leaves the session live here with nothing
// lost. A flip whose answer is lost is resolved from the record before
// MoveTo returns. The target never needs the commit: once the move's
// expiry has passed on the Redis clock, the record says whether the flip
// landed (the lock is its token) or never will.

const (
	// moveWindow bounds the time from a move's prepare to its flip
	// (less when ctx ends sooner): the expiry the target accepts and the
	// flip checks on the Redis clock. A flip later than that never lands.
	moveWindow = 5 * time.Second
	// moveResend is how often a prepare goes out again while no answer came
	// (the bus may lose one; the target answers a repeat as the first).
	moveResend = time.Second
	// moveAliveAfter is how long a move waits for its target's answer
	// before it reads the target's presence: a live target answers in well
	// under a millisecond, so only a late answer costs the read (a Redis
	// round trip and a goroutine), and a dead target is still given up
	// within moveAliveAfter and one read.
	moveAliveAfter = 20 * time.Millisecond
	// moveSlack is what a move's message needs beside the data (ids, the
	// headers, the MAC), under messaging.DefaultMaxMoveBytes.
	moveSlack = 16 << 10
)

// MoveTo moves the live session to the live Node jobID, with its data as
// it is now. On nil, jobID holds the lock and the data, and this session
// has ended: Done is closed, Err matches ErrMoved (a *MovedError naming
// jobID), and Update answers it; jobID's Join of the key returns the
// profile without a Redis command for its Config.MoveHold. (One race: when
// this server's lease lapses while the flip's answer is on its way, the
// fence, which never waits for I/O, ends the session first, and Err says
// so; MoveTo still answers nil, since jobID holds the profile.) No leave
// cleanup (OnRelease) runs and the game hears no Kick: the game asked for
// the move.
//
// On an error the session is still live here, nothing lost: a target that
// is not alive, runs no driver of this name, is closing, or refuses
// (*MoveRefusedError, ErrMoveRefused); no answer within the context or
// the move window of 5 s (ctx.Err(), or an error matching
// context.DeadlineExceeded); data over the bus's limit (ErrTooLarge); a
// pending trade (ErrTradePending). Errors that end the session are those
// of a write (ErrLockLost). Updates wait while the move runs.
func (p *Profile[T]) MoveTo(ctx context.Context, jobID string) error {
	d := p.d
	if err := jobid.Check(jobID); err != nil {
		return fmt.Errorf("move %q: %w", p.key, err)
	}
	if jobID == d.node.jobID {
		return &MoveRefusedError{Key: p.key, Target: jobID, Reason: RefusedHeld, Why: "the target is this server"}
	}
	if !d.node.handoffOn || d.cfg.noHandoff {
		return fmt.Errorf("move %q: %w: a move needs the bus (handoff is off)", p.key, ErrInvalidConfig)
	}
	r := &request{ctx: ctx, run: func(ctx context.Context) error { return p.move(ctx, jobID) }}
	if ran, err := p.runInline(r); ran {
		return err
	}
	r.done = make(chan error, 1)
	if err := p.enqueue(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if p.withdraw(r) {
			return ctx.Err()
		}
	}
	// Once under way, the move's own answer is awaited whatever ctx does:
	// its waits end with ctx, but a flip sent may have landed, and only the
	// move can say (its flip is bounded by SaveTimeout, its resolution by
	// the session's fences).
	return <-r.done
}

// move runs a move on the owner, and records its duration and outcome
// (playerdata.move.duration).
func (p *Profile[T]) move(ctx context.Context, to string) error {
	start := p.d.node.clock.Now()
	err := p.moveOnce(ctx, to)
	p.d.tel.MoveDone(ctx, p.d.node.clock.Since(start), moveOutcome(ctx, err))
	return err
}

// moveOutcome classes a move's result for its metric.
func moveOutcome(ctx context.Context, err error) telemetry.MoveOutcome {
	switch {
	case err == nil:
		return telemetry.MoveLanded
	case errors.Is(err, ErrMoveRefused):
		return telemetry.MoveRefused
	case ctx.Err() != nil:
		return telemetry.MoveCancelled
	}
	return telemetry.MoveFailed
}

// moveOnce is one move, on the owner.
func (p *Profile[T]) moveOnce(ctx context.Context, to string) error {
	if err := p.updatable(); err != nil {
		p.fenceOn(err)
		return err
	}
	if !p.closeGate() {
		return fmt.Errorf("move %q: %w: a trade of the profile is running", p.key, ErrTradePending)
	}
	defer p.openGate()
	snap, err := p.moveSnapshot(ctx)
	if err != nil {
		return err
	}
	prep, err := p.prepareMove(ctx, snap, to)
	if err != nil {
		return err
	}
	ctx, span := p.d.tel.StartMove(ctx, p.key, to, prep.ID)
	p.d.outSet(p.key, moveOut{id: prep.ID, to: to, state: record.MovePrepared})
	defer p.d.outDone(p.key, prep.ID)
	p.d.moveHook(movePrepared)
	span.Step("prepare")
	accept, err := p.askTarget(ctx, prep)
	if err == nil {
		p.d.outSet(p.key, moveOut{id: prep.ID, to: to, state: record.MoveAccepted})
		p.d.moveHook(moveAccepted)
		span.Step("accepted")
		if err = p.flip(ctx, prep, snap, accept); err == nil {
			span.Step("flipped")
		}
	}
	if err != nil {
		p.markCancelled(prep, err) // off the move's path: MoveTo does not wait for it
	}
	span.End(err)
	return err
}

// closeGate makes Updates wait while the move runs (the data the prepare
// carries is the data the flip writes). It reports false when a trade
// holds the gate.
func (p *Profile[T]) closeGate() bool {
	x := p.extrasMade()
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	if x.gate != nil {
		return false
	}
	x.gate = make(chan struct{})
	return true
}

// openGate lets Updates go on (they find the session ended if it moved).
func (p *Profile[T]) openGate() {
	x := p.extras() // made by closeGate
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	close(x.gate)
	x.gate = nil
}

// moveSnapshot takes what the move carries. What the flip does not write
// (a version due in the history, refused messages, an adoption or a trade
// not settled) is written first by a save.
func (p *Profile[T]) moveSnapshot(ctx context.Context) (snapshot, error) {
	snap, err := p.snapshot()
	if err != nil {
		p.fenceOn(err)
		return snap, err
	}
	adopting := len(p.view().earlierTokens()) > 0
	changed := snap.stored != p.w.data
	if adopting || len(snap.refused) > 0 || p.extras().pending() != nil || (changed && (p.w.has(flagKeepNext) || p.versionDue())) {
		if err := p.write(ctx, writeSave); err != nil {
			return snap, err
		}
		if snap, err = p.snapshot(); err != nil {
			p.fenceOn(err)
			return snap, err
		}
	}
	uids, meta := p.w.asStored()
	switch {
	case p.w.has(flagCorrupt):
		return snap, fmt.Errorf("move %q: %w: a profile loaded for a restore does not move", p.key, ErrCorruptRecord)
	case len(snap.data)+len(uids)+len(meta)+len(snap.uids)+len(snap.meta) > messaging.DefaultMaxMoveBytes-moveSlack:
		return snap, fmt.Errorf("move %q: %w: %d bytes do not fit a move's message (%d)", p.key, ErrTooLarge,
			len(snap.data), messaging.DefaultMaxMoveBytes-moveSlack)
	case len(snap.data) > p.d.cfg.MaxDataBytes:
		return snap, fmt.Errorf("move %q: %w: %d bytes, limit %d", p.key, ErrTooLarge, len(snap.data), p.d.cfg.MaxDataBytes)
	}
	return snap, nil
}

// prepareMove builds the prepare: a new move id, the expiry on the Redis
// clock (as reckoned from the load's reading of it), the data.
func (p *Profile[T]) prepareMove(ctx context.Context, snap snapshot, to string) (moveMsg, error) {
	d := p.d
	id, err := d.node.newToken()
	if err != nil {
		return moveMsg{}, err
	}
	now := d.node.clock.Now()
	window := moveWindow
	if dl, ok := ctx.Deadline(); ok {
		window = min(window, dl.Sub(now))
	}
	if window < time.Millisecond {
		return moveMsg{}, fmt.Errorf("move %q: %w", p.key, context.DeadlineExceeded)
	}
	redisNow := d.redisTime(p.w.redis, now)
	uids, meta := p.w.asStored()
	_, seen := p.w.inboxSeqs()
	m := moveMsg{Step: stepPrepare, ID: id, Driver: d.cfg.Name, Key: p.key, From: d.node.jobID, To: to,
		Expiry: redisNow.Add(window).UnixMilli(), Window: window.Milliseconds(), Data: snap.data,
		Schema: int(p.w.stored.schema), SchemaMin: int(p.w.stored.schemaMin), UIDs: uids, Meta: meta,
		SeenSeq: seen}
	if p.w.histAt != 0 {
		m.HistAt = wallTime(p.w.histAt).UnixMilli()
	}
	if snap.stored != p.w.data {
		m.Schema, m.SchemaMin = d.codec.WriteVersion(int(p.w.schema), int(p.w.schemaMin))
	}
	if snap.uids != nil {
		m.UIDs, m.Meta = snap.uids, snap.meta
	}
	return m, nil
}

// askTarget sends the prepare (again every moveResend) and waits for the
// target's answer, within ctx and the move's window. When no answer came
// within moveAliveAfter, a presence read of the target runs beside the
// wait: a target that reads stopped is not waited for.
func (p *Profile[T]) askTarget(ctx context.Context, m moveMsg) (moveMsg, error) {
	n := p.d.node
	answers := n.moves.wait(m.ID)
	defer n.moves.done(m.ID)
	wm, err := m.message()
	if err != nil {
		return moveMsg{}, err
	}
	n.handoff.SendMove(ctx, m.To, wm)

	actx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	alive := make(chan presencecore.Status, 1)
	late := false // the presence read was started
	// step fires first at moveAliveAfter (the presence read starts), then
	// every moveResend (the prepare goes out again).
	step := n.clock.Timer(moveAliveAfter)
	defer step.Stop()
	window := n.clock.Timer(time.Duration(m.Window) * time.Millisecond)
	defer window.Stop()
	for {
		select {
		case <-step.C:
			step.Reset(moveResend)
			if late {
				n.handoff.SendMove(ctx, m.To, wm)
				continue
			}
			late = true
			wg.Go(func() { p.watchAlive(actx, m.To, alive) })
		case a := <-answers:
			if a.From != m.To {
				continue
			}
			if a.Step == stepRefuse {
				return moveMsg{}, &MoveRefusedError{Key: p.key, Target: m.To, Reason: a.Reason, Why: a.Why}
			}
			if a.Token != "" {
				return a, nil
			}
		case s := <-alive:
			if s == presencecore.Stopped {
				return moveMsg{}, &MoveRefusedError{Key: p.key, Target: m.To, Reason: RefusedNotAlive,
					Why: "its presence reads stopped"}
			}
		case <-window.C:
			return moveMsg{}, fmt.Errorf("move %q to %s: no answer within the move's window (%d ms): %w", p.key, m.To,
				m.Window, context.DeadlineExceeded)
		case <-ctx.Done():
			return moveMsg{}, ctx.Err()
		}
	}
}

// moveArgs are move.lua's arguments for prepare m accepted with accept.
func (p *Profile[T]) moveArgs(m moveMsg, snap snapshot, accept moveMsg) record.MoveArgs {
	d := p.d
	a := record.MoveArgs{Token: p.lockToken(), Expiry: time.UnixMilli(m.Expiry), To: m.To, ToToken: accept.Token,
		ToPresence: accept.Presence, ID: m.ID, From: d.node.jobID, Applied: slices.Clone(snap.applied)}
	req := record.SaveArgs{}
	if snap.stored != p.w.data {
		a.Data, a.Schema, a.SchemaMin = snap.data, m.Schema, m.SchemaMin
		req.Data, req.Schema, req.SchemaMin = snap.data, m.Schema, m.SchemaMin
	}
	if snap.uids != nil {
		a.Meta = &record.Meta{UserIDs: snap.uids, Meta: snap.meta}
		req.Meta = a.Meta
	}
	a.Sum = p.sumOf(req, snap)
	return a
}

// watchAlive reads the target's presence until it reads alive (the answer
// will come) or stopped (sent on stopped), or ctx ends: an unknown reading
// (a failed read, a young Redis run) is read again every moveResend.
func (p *Profile[T]) watchAlive(ctx context.Context, to string, stopped chan<- presencecore.Status) {
	n := p.d.node
	for {
		switch n.presence.IsAlive(ctx, to) {
		case presencecore.Alive:
			return
		case presencecore.Stopped:
			stopped <- presencecore.Stopped
			return
		}
		t := n.clock.Timer(moveResend)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
