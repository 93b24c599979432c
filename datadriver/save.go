package datadriver

import (
	"context"
	"errors"
	"fmt"
)

// Save writes the profile now, fenced by its lock (with MinReplicas it waits
// for replicas). An error matching ErrLockLost means the session ended
// without its progress; ErrTooLarge wrote nothing; another error leaves the
// session live (autosave retries). ctx bounds the wait and the write.
func (p *Profile[T]) Save(ctx context.Context) error {
	return p.do(ctx, func(ctx context.Context) error {
		return p.write(ctx, writeSave)
	})
}

// Release ends the session: the leave cleanups, then the release save, which
// writes the data and clears the lock in one round trip; on success Done
// closes and Err is ErrReleased. When the save fails the profile is retained
// under its lock: a rejoin here adopts it, a request from another server or
// the owner's retries release it later. Data over MaxDataBytes is released
// with the last data that fit (ErrTooLarge). Idempotent.
func (p *Profile[T]) Release(ctx context.Context) error {
	err := p.do(ctx, p.leaveAndRelease(causeGameRelease))
	if errors.Is(err, ErrReleased) {
		return nil
	}
	return err
}

// release runs the release on the owner: the leave cleanups, then the
// release save. It settles the profile: ended (released) when the save
// landed, retained when it failed.
func (p *Profile[T]) release(ctx context.Context) error {
	switch p.phaseNow() {
	case phaseEnded:
		return p.Err()
	case phaseLive, phaseAdopting:
		// A rejoin on this server adopted the retained profile first: it is
		// a new session now.
		return fmt.Errorf("release %q: a rejoin on this server took the profile over", p.key)
	}
	p.awaitCallbacks(ctx)
	cerr := p.runCleanups()
	err := p.write(ctx, writeRelease)
	var landed *landedButErr
	if err == nil || errors.As(err, &landed) {
		p.endWith(causeReleased, ErrReleased)
		p.d.log.Debug("profile released", "key", p.key)
		if err == nil && cerr != nil {
			return fmt.Errorf("release %q: a leave cleanup failed, so the data as it was before the cleanups was saved: %w",
				p.key, cerr)
		}
		return err
	}
	if p.ended.Load() != nil { // lost meanwhile, or by this very write
		return err
	}
	p.retain(err)
	return err
}

// leaveAndRelease is the executor's work for a leave the game or the Node
// asks for and waits on: a live session leaves for c, then the release
// runs (a session already leaving or retained releases now).
func (p *Profile[T]) leaveAndRelease(c cause) func(context.Context) error {
	return func(ctx context.Context) error {
		p.leave(c)
		return p.release(ctx)
	}
}

// runCleanups runs the registered leave cleanups once, when the release
// will try to save what they change: the session has not stopped and its
// lease holds.
//
// A cleanup that panics leaves the data as it was before the cleanups ran
// (a copy is taken first), so the release saves no half made change; the
// panic comes back as an error matching ErrCallbackPanic.
func (p *Profile[T]) runCleanups() error {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	x := p.extras()
	if x == nil || len(x.cleanups) == 0 || p.state.stopped() || p.leaseErr(p.d.node.clock.Now()) != nil {
		return nil
	}
	fns := x.cleanups
	x.cleanups = nil
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
