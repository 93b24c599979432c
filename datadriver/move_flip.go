package datadriver

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// The source's commit point: move.lua flips the lock, with the data, from
// its token to the target's, fenced by the source's token and the move's
// expiry on the Redis clock.

// flip runs the flip of prepare m, which the target accepted. Landed, it
// ends the session (ErrMoved) and sends the commit; refused, the session
// goes on here (or ends, when the refusal says the lock is lost); without
// an answer, the record decides (resolveFlip).
func (p *Profile[T]) flip(ctx context.Context, m moveMsg, snap snapshot, accept moveMsg) error {
	d := p.d
	if err := p.leaseErr(d.node.clock.Now()); err != nil {
		p.fenceOn(err)
		return err
	}
	args := p.moveArgs(m, snap, accept)
	// Not cancelled with ctx: a flip sent is answered (or times out) before
	// the move decides.
	cctx, cancel := d.node.clock.WithTimeout(context.WithoutCancel(ctx), d.node.cfg.SaveTimeout+d.node.cfg.ReplicaTimeout)
	call := args.Call(d.recordKey(p.key))
	v, _, err := d.node.runReplicated(cctx, call.Call)
	cancel()
	res, err := call.Answer(v, err)
	if err != nil {
		return p.resolveFlip(m, accept, err)
	}
	switch res.Outcome {
	case record.Moved:
		p.moved(m, accept, flipState{ver: res.Ver, epoch: res.Epoch, inboxSeq: res.InboxSeq, at: res.At,
			lockAt: res.LockAt})
		return nil
	case record.MoveExpired:
		return &MoveRefusedError{Key: p.key, Target: m.To, Reason: RefusedExpired,
			Why: "the flip came after the move's expiry; the session stays here"}
	case record.MoveTradeHeld:
		return fmt.Errorf("move %q: %w (%s)", p.key, ErrTradePending, res.Trade)
	}
	var end error
	switch res.Outcome {
	case record.MoveLost:
		holder := res.Holder.Job
		if holder == "" {
			holder = "nobody"
		}
		end = endsSession(causeTaken, fmt.Errorf("move %q: %w (the lock is held by %s)", p.key, ErrLockLost, holder))
	case record.MoveGone:
		end = endsSession(causeRecordGone, fmt.Errorf("move %q: %w: %w", p.key, ErrLockLost, errRecordGone))
	default:
		end = endsSession(causeRecordCorrupt, fmt.Errorf("move %q: %w: %w", p.key, ErrLockLost,
			d.corruptField(p.key, res.Corrupt)))
	}
	p.fenceOn(end)
	return end
}

// moved ends the session of a move whose flip landed and sends the commit.
func (p *Profile[T]) moved(m, accept moveMsg, st flipState) {
	d := p.d
	d.moveHook(moveFlipped)
	p.endWith(causeMoved, &MovedError{Key: p.key, To: m.To, ID: m.ID})
	d.node.sendMove(moveMsg{Step: stepCommit, ID: m.ID, Driver: m.Driver, Key: m.Key, To: m.To, Token: accept.Token,
		Ver: st.ver, Epoch: st.epoch, At: st.at.UnixMilli(), LockAt: st.lockAt.UnixMilli(), InboxSeq: st.inboxSeq})
	d.log.Info("profile moved", "key", p.key, "to", m.To, "move", m.ID, "epoch", st.epoch)
}

// resolveFlip decides a flip whose answer was lost (callErr): it may have
// landed, or land until the move's expiry. The session takes no change
// until the record says: the target's token, it moved; the source's once
// the expiry has passed on the Redis clock, it stays here (callErr is
// returned); another's, it is lost. It reads until then, or until the
// session ends otherwise (its lease, its age: the fences still run).
func (p *Profile[T]) resolveFlip(m, accept moveMsg, callErr error) error {
	d := p.d
	d.log.Warn("a move's flip got no answer; reading the record to learn whether it landed", "key", p.key,
		"move", m.ID, "err", callErr)
	for {
		ctx, cancel := d.node.clock.WithTimeout(p.bg(), d.node.cfg.SaveTimeout)
		st, err := record.ReadMoveState(ctx, d.node.rdb, d.recordKey(p.key))
		cancel()
		wait := moveRetry
		if err == nil {
			switch {
			case st.Token == accept.Token:
				p.moved(m, accept, flipState{ver: st.Ver, epoch: st.Epoch, inboxSeq: st.InboxSeq, at: st.At,
					lockAt: st.Now})
				return nil
			case st.Token != p.lockToken():
				end := endsSession(causeTaken, fmt.Errorf("move %q: %w (the lock is another's)", p.key, ErrLockLost))
				p.fenceOn(end)
				return end
			case st.Now.UnixMilli() > m.Expiry:
				return fmt.Errorf("move %q to %s: the flip did not land (the session stays here): %w", p.key, m.To, callErr)
			}
			wait = time.Duration(m.Expiry-st.Now.UnixMilli())*time.Millisecond + moveResolveMargin
		}
		t := d.node.clock.Timer(wait)
		select {
		case <-p.Done():
			t.Stop()
			return p.Err()
		case <-t.C:
		}
	}
}
