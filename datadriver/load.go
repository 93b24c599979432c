package datadriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// LoadOptions tune one Load or RestoreAt call.
type LoadOptions struct {
	// HandoffWait bounds the wait for the key's lock, here and elsewhere
	// (negative: none; a held key answers ErrLocked at once).
	// default: Config.LocalHandoff, else none
	HandoffWait time.Duration
}

// Join loads key for a player session: it waits up to LocalHandoff (else
// LockWait) for the key on this Node, adopting a retained profile, and up
// to LockWait for another server to hand it over, then fails closed
// (ErrWaitTimeout, the record untouched). A cancelled ctx answers ctx.Err().
func (d *Driver[T]) Join(ctx context.Context, key string) (*Profile[T], error) {
	local := d.cfg.LocalHandoff
	if local == 0 {
		local = d.cfg.LockWait
	}
	start := d.node.clock.Now()
	ctx = d.tel.StartJoin(ctx, key)
	note := &joinNote{}
	p, err := d.load(ctx, key, loadSpec{localWait: local, remoteWait: d.cfg.LockWait, mode: loadPlay, note: note})
	took := d.node.clock.Since(start)
	d.tel.JoinDone(ctx, took, note.path(), joinOutcome(ctx, err), err)
	if err != nil {
		d.log.Debug("join refused", "key", key, "took", took, "path", note.path().String(), "err", err)
	} else {
		d.log.Debug("join", "key", key, "took", took, "path", note.path().String(), "epoch", p.Epoch())
	}
	return p, err
}

// joinNote is what a load did, for the join's metrics and logs.
type joinNote struct {
	waitedLocal, waitedRemote, adopted bool
	how                                record.Taken
}

// path is the join's path (telemetry.JoinPath).
func (n *joinNote) path() telemetry.JoinPath {
	switch {
	case n.adopted:
		return telemetry.JoinAdopted
	case n.how == record.TakenStolen || n.how == record.TakenExpired || n.how == record.TakenOwn:
		return telemetry.JoinTakeover
	case n.waitedRemote:
		return telemetry.JoinHandoff
	case n.waitedLocal:
		return telemetry.JoinSameServer
	}
	return telemetry.JoinFree
}

// joinOutcome classes a join's error for its metric.
func joinOutcome(ctx context.Context, err error) telemetry.JoinOutcome {
	switch {
	case err == nil:
		return telemetry.JoinLoaded
	case errors.Is(err, ErrWaitTimeout), errors.Is(err, ErrLocked):
		return telemetry.JoinRefused
	case ctx.Err() != nil, errors.Is(err, ErrClosed):
		return telemetry.JoinCancelled
	}
	return telemetry.JoinFailed
}

// Load loads key for manual use (an admin tool, a job). It waits
// opts.HandoffWait, else LocalHandoff, else not at all; with no wait a key
// held elsewhere answers a *LockedError at once. Errors are Join's.
func (d *Driver[T]) Load(ctx context.Context, key string, opts LoadOptions) (*Profile[T], error) {
	w := d.loadWait(opts)
	return d.load(ctx, key, loadSpec{localWait: w, remoteWait: w})
}

func (d *Driver[T]) loadWait(opts LoadOptions) time.Duration {
	switch {
	case opts.HandoffWait > 0:
		return opts.HandoffWait
	case opts.HandoffWait < 0:
		return 0
	}
	return d.cfg.LocalHandoff
}

// load is the whole load: the same-server wait (and adoption), then the
// acquire, waiting on another server's lock up to remoteWait.
// loadSpec says how one load waits and what it accepts.
// loadMode is what a load is for.
type loadMode uint8

const (
	// loadPlay: a session for the game.
	loadPlay loadMode = iota
	// loadRestore: RestoreAt's session. A record whose data does not decode
	// is accepted (RestoreAt replaces it with a kept version): the profile is
	// marked corrupt and never writes its own data.
	loadRestore
	// loadWipe: Wipe's session, which only erases the record under its lock:
	// the data is not decoded, no message is applied, and the profile never
	// writes data.
	loadWipe
)

type loadSpec struct {
	// localWait bounds the wait for a load or leave of the key on this Node,
	// remoteWait the wait for another server's lock.
	localWait, remoteWait time.Duration
	// mode says what the profile is loaded for: play, a restore or a wipe.
	mode loadMode
	// note, when set, records what the load did (Join's path).
	note *joinNote
}

// purpose is what the load asks another session of the key for (see
// lockhandoff.ReleaseFunc): a restore, a wipe, or a join ("").
func (s loadSpec) purpose() string {
	switch s.mode {
	case loadRestore:
		return messaging.PurposeRestore
	case loadWipe:
		return messaging.PurposeWipe
	}
	return ""
}

func (d *Driver[T]) load(ctx context.Context, key string, spec loadSpec) (*Profile[T], error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-d.node.closing:
		return nil, errClosing
	default:
	}
	if !d.track() { // count the load, so shutdown waits for it
		return nil, errClosing
	}
	defer d.wg.Done()

	// Stop waiting when the driver shuts down.
	if lctx, ok := endsWith(ctx, d.loads); ok {
		ctx = lctx
	} else {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(d.loads, cancel)
		defer stop()
		ctx = lctx
	}

	if spec.note == nil {
		spec.note = &joinNote{}
	}
	if p, err := d.claimMoved(ctx, key); p != nil {
		return p, nil // moved here: no Redis command
	} else if err != nil {
		return nil, d.loadErr(ctx, err)
	}
	start := d.node.clock.Now()
	for {
		p, adopt, err := d.reserve(ctx, key, start.Add(spec.localWait), spec)
		if err != nil {
			return nil, d.loadErr(ctx, err)
		}
		if adopt {
			ok, err := d.adopt(ctx, p)
			if err != nil {
				return nil, d.loadErr(ctx, err)
			}
			if ok {
				spec.note.adopted = true
				return p, nil
			}
			continue // the lock was gone: load the record normally
		}
		p, err = d.acquire(ctx, key, start.Add(spec.remoteWait), spec, spec.note)
		d.mu.Lock()
		if err == nil {
			switch {
			case d.closed:
				err = ErrClosed
			default:
				// The lease may have lapsed while the record was decoded.
				if err = p.leaseErr(d.node.clock.Now()); err == nil {
					d.profiles[key] = p
					p.startLocked()
				}
			}
		}
		d.settleLocked(key)
		d.mu.Unlock()
		if err != nil {
			if p != nil {
				p.abandon()
				d.giveBackSoon(key, p.lockToken(), nil)
			}
			return nil, d.loadErr(ctx, err)
		}
		return p, nil
	}
}

// loadErr turns a cancelled context into ctx.Err() (never a contention
// error) and a shut-down driver into ErrClosing (which also matches
// ErrClosed).
func (d *Driver[T]) loadErr(ctx context.Context, err error) error {
	if d.loads.Err() != nil {
		return errClosing
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
