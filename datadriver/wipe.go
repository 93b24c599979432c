package datadriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/record"
)

// errWiped marks the end of a session whose record Wipe erased.
var errWiped = errors.New("the record was erased")

// Wipe erases key's record and every key beside it (an erasure request):
// it takes the lock the way Join does, with Join's waits and errors (a live
// session here or elsewhere ends with ReasonWiped), then erases everything
// in one script fenced by that lock, so no session plays on after its
// record is gone. A wipe that cannot get the lock erases nothing. The next
// join of key starts again at epoch 1 with Defaults.
func (d *Driver[T]) Wipe(ctx context.Context, key string) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	if p := d.liveProfile(key); p != nil {
		// The game holds it here: erase under its lock, then end it.
		if err := p.do(ctx, p.wipe); err != nil {
			return fmt.Errorf("wipe %q: %w", key, err)
		}
		p.endWith(causeWiped, fmt.Errorf("wipe %q: %w: %w", key, ErrLockLost, errWiped))
		d.log.Info("wiped a profile held on this server", "key", key)
		return nil
	}
	local := d.cfg.LocalHandoff
	if local == 0 {
		local = d.cfg.LockWait
	}
	p, err := d.load(ctx, key, loadSpec{localWait: local, remoteWait: d.cfg.LockWait, mode: loadWipe})
	if err != nil {
		return fmt.Errorf("wipe %q: %w", key, err)
	}
	if err := p.do(ctx, p.wipe); err != nil {
		p.endWith(causeClosed, ErrClosed) // gives the lock back, writing no data
		return fmt.Errorf("wipe %q: %w", key, err)
	}
	p.endWith(causeReleased, errWiped) // the lock went with the record
	d.log.Info("wiped a profile", "key", key)
	return nil
}

// liveProfile is key's live session on this Node, or nil.
func (d *Driver[T]) liveProfile(key string) *Profile[T] {
	if p := d.lookup(key); p != nil && p.phaseNow() == phaseLive {
		return p
	}
	return nil
}

// wipe erases the record under the profile's lock (its token, or an earlier
// one an adoption has not yet moved): the lease is checked first, like any
// write's.
func (p *Profile[T]) wipe(ctx context.Context) error {
	if err := p.leaseErr(p.d.node.clock.Now()); err != nil {
		return err
	}
	v := p.view()
	tokens := append([]string{v.token}, v.earlierTokens()...)
	err := record.Wipe(ctx, p.d.node.rdb, p.d.recordKey(p.key), tokens...)
	if errors.Is(err, record.ErrWipeLost) {
		return fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	return err
}
