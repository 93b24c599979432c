package datadriver

import (
	"errors"

	"github.com/ckernel/playerdata/internal/movestatus"
	"github.com/ckernel/playerdata/internal/record"
)

// Every state of a move is visible without a Redis command on its path:
// COMMITTED is written by the flip itself; CANCELLED by movemark.lua once
// the move has failed (after MoveTo knows its answer, on a goroutine of
// its own: MoveTo does not wait for it); PREPARED and ACCEPTED, which last
// a round trip, live only in the source's memory, and the source answers a
// status query on the bus with them (playerdata inspect --nats).

// moveOut is a move of one of this driver's profiles in flight, as its
// source knows it.
type moveOut struct {
	id, to, state string
}

// outSet records the state of key's move in flight (a new move, or a
// step of it).
func (d *Driver[T]) outSet(key string, o moveOut) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moves.out == nil {
		d.moves.out = make(map[string]moveOut)
	}
	d.moves.out[key] = o
}

// outDone forgets key's move id once it has ended.
func (d *Driver[T]) outDone(key, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.moves.out[key].id == id {
		delete(d.moves.out, key)
	}
}

// moveStatus is the answer to a status query of key: its move in flight
// from here, if one is. (A target does not answer for a move it accepted:
// the lock's holder is asked, and while the move is in flight that is the
// source; once the flip landed, the record says COMMITTED.)
func (d *Driver[T]) moveStatus(key string) movestatus.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, ok := d.moves.out[key]; ok {
		return movestatus.Status{Move: o.id, State: o.state, From: d.node.jobID, To: o.to}
	}
	return movestatus.Status{}
}

// moveStatuser is a driver that answers status queries (every Driver).
type moveStatuser interface {
	moveStatus(key string) movestatus.Status
}

var _ moveStatuser = (*Driver[int])(nil)

// answerMoveStatus answers status query q about a driver's key (the bus's
// delivery goroutine: no I/O but the queued answer). With a RequestKey, an
// unsigned query is not answered.
func (n *Node) answerMoveStatus(q moveMsg, signed bool) {
	if len(n.cfg.RequestKey) > 0 && !signed {
		return
	}
	n.mu.Lock()
	d := n.drivers[q.Driver]
	n.mu.Unlock()
	var s movestatus.Status
	if sa, ok := d.(moveStatuser); ok {
		s = sa.moveStatus(q.Key)
	}
	s.Step, s.ID = movestatus.StepStatus, q.ID
	wm, err := s.Message(q.Driver, q.Key)
	if err != nil {
		n.log.Warn("move: status not sent", "err", err)
		return
	}
	n.handoff.SendMove(n.ctx, q.From, wm)
}

// maxMoveWhy bounds the reason a cancelled move leaves in the record.
const maxMoveWhy = 200

// markCancelled writes move m, which ended with err before any flip could
// land, as the record's last move (CANCELLED, why: err), on a goroutine
// the driver waits for. It writes nothing when the session has ended (the
// lock may be another's: the mark's fence would refuse it anyway).
func (p *Profile[T]) markCancelled(m moveMsg, err error) {
	if p.updatable() != nil {
		return
	}
	why := err.Error()
	var re *MoveRefusedError
	if errors.As(err, &re) {
		why = "refused (" + string(re.Reason) + "): " + re.Why
	}
	if len(why) > maxMoveWhy {
		why = why[:maxMoveWhy]
	}
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	mark := record.MoveMark{Token: p.lockToken(), ID: m.ID, State: record.MoveCancelled, From: m.From, To: m.To, Why: why}
	d.goTracked(func() {
		ctx, cancel := d.node.clock.WithTimeout(d.ctx, d.node.cfg.SaveTimeout)
		defer cancel()
		if _, err := record.MarkMove(ctx, d.node.rdb, d.recordKey(p.key), mark); err != nil && ctx.Err() == nil {
			d.log.Debug("a cancelled move was not written to the record", "key", p.key, "move", m.ID, "err", err)
		}
	})
}
