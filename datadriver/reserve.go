package datadriver

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// The same-server side of a load: it waits while the key is still loading
// on this Node or a profile of it is leaving, and ends a live session of it.

// reserve waits until key can be loaded on this Node: no other load of it in
// flight and no profile of it leaving. It returns with the key reserved, or
// with a retained profile to adopt (adopt true: the key is reserved for the
// adoption, which the profile's executor runs).
// A live session of the key on this Node is asked to end, as another server
// would ask it, when there is time to wait for it.
func (d *Driver[T]) reserve(ctx context.Context, key string, deadline time.Time, spec loadSpec) (*Profile[T], bool, error) {
	note := spec.note
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		if d.closed {
			return nil, false, ErrClosed
		}
		p := d.profiles[key]
		switch {
		case d.loading[key]:
		case p == nil:
			d.loading[key] = true
			return nil, false, nil
		case p.phaseNow() == phaseRetained:
			// Reserved for the adoption, which its executor runs.
			d.loading[key] = true
			return p, true, nil
		case p.phaseNow() == phaseLive:
			if !d.node.clock.Now().Before(deadline) {
				return nil, false, d.localLocked(key)
			}
			// Asked to end as another server would ask it: Kick, the leave
			// cleanups, the release save.
			p.askLeave(askedFor(spec.purpose()), p.view().gen)
		}
		left := deadline.Sub(d.node.clock.Now())
		if left <= 0 {
			return nil, false, fmt.Errorf("load: %w: %w", ErrWaitTimeout, d.localLocked(key))
		}
		ch := d.waitCh(key)
		d.mu.Unlock()
		if !note.waitedLocal {
			note.waitedLocal = true
			d.tel.StartWait(ctx, telemetry.WaitSameServer)
			d.log.Debug("load waits for the key on this server", "key", key)
		}
		t := d.node.clock.Timer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		d.mu.Lock()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
	}
}

// localLocked describes the key as locked by this Node.
func (d *Driver[T]) localLocked(key string) *LockedError {
	return lockedError(key, record.Lock{Job: d.node.jobID, Presence: d.presenceFlag()}, true)
}
