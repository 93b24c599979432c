package datadriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ckernel/playerdata/lockhandoff"
)

// LoadOptions tune one Load or RestoreAt call.
type LoadOptions struct {
	// HandoffWait bounds how long the load waits for the key's lock: for a
	// load or release of the key on this Node, and for another server to
	// hand it over. A negative value does not wait at all.
	// default: Config.LocalHandoff, else 0 (a key held elsewhere answers
	// ErrLocked at once and nobody is asked to release it)
	HandoffWait time.Duration
}

// Join loads key for a player session. It waits up to LocalHandoff (else
// LockWait) for a load or leave of the same key on this Node, adopting a
// retained profile whose leave save failed, and up to LockWait for another
// server to hand the lock over. It fails closed: when the wait runs out the
// error matches ErrWaitTimeout and the record is untouched. A cancelled ctx
// answers ctx.Err().
func (d *Driver[T]) Join(ctx context.Context, key string) (*Profile[T], error) {
	local := d.cfg.LocalHandoff
	if local == 0 {
		local = d.cfg.LockWait
	}
	return d.load(ctx, key, local, d.cfg.LockWait)
}

// Load loads key for manual use (an admin tool, a job). It waits
// opts.HandoffWait, else LocalHandoff, else not at all; with no wait a key
// held elsewhere answers a *LockedError at once. Errors are Join's.
func (d *Driver[T]) Load(ctx context.Context, key string, opts LoadOptions) (*Profile[T], error) {
	w := d.loadWait(opts)
	return d.load(ctx, key, w, w)
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
func (d *Driver[T]) load(ctx context.Context, key string, localWait, remoteWait time.Duration) (*Profile[T], error) {
	if err := ValidKey(key); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !d.track() { // count the load, so shutdown waits for it
		return nil, ErrClosed
	}
	defer d.wg.Done()

	// Stop waiting when the driver shuts down.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.ctx, cancel)
	defer stop()

	start := d.node.clock.Now()
	for {
		p, adopt, err := d.reserve(ctx, key, start.Add(localWait))
		if err != nil {
			return nil, d.loadErr(ctx, err)
		}
		if adopt {
			ok, err := d.adopt(ctx, p)
			if err != nil {
				return nil, d.loadErr(ctx, err)
			}
			if ok {
				return p, nil
			}
			continue // the lock was gone: load the record normally
		}
		p, err = d.acquire(ctx, key, start.Add(remoteWait), remoteWait > 0)
		d.mu.Lock()
		delete(d.loading, key)
		if err == nil {
			switch {
			case d.closed:
				err = ErrClosed
			default:
				// The lease may have lapsed while the record was decoded.
				if err = p.leaseErrLocked(d.node.clock.Now()); err == nil {
					d.profiles[key] = p
					p.startAutosaveLocked()
					p.armKeeperLocked()
				}
			}
		}
		d.notify(key)
		reqs := d.takePendingLocked(key)
		d.mu.Unlock()
		for _, r := range reqs { // requests that arrived while the load was in flight
			d.HandleRequest(key, r.token, r.from)
		}
		if err != nil {
			if p != nil {
				p.abandon()
				d.giveBack(key, p.token, nil)
			}
			return nil, d.loadErr(ctx, err)
		}
		return p, nil
	}
}

// loadErr turns a cancelled context into ctx.Err() (never a contention
// error) and a shut-down driver into ErrClosed.
func (d *Driver[T]) loadErr(ctx context.Context, err error) error {
	if d.ctx.Err() != nil {
		return ErrClosed
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// reserve waits until key can be loaded on this Node: no other load of it in
// flight and no profile of it leaving. It returns with the key reserved, or
// with a retained profile to adopt (adopt true, the profile marked adopting).
// A live session of the key on this Node is asked to end, as another server
// would ask it, when there is time to wait for it.
func (d *Driver[T]) reserve(ctx context.Context, key string, deadline time.Time) (*Profile[T], bool, error) {
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
		case p.state == stateRetained && !p.saving:
			p.state = stateAdopting
			d.notify(key)
			return p, true, nil
		case p.state == stateActive:
			if !d.node.clock.Now().Before(deadline) {
				return nil, false, d.localLocked(key)
			}
			d.endSessionLocked(p, ReasonJoinedElsewhere)
		}
		left := deadline.Sub(d.node.clock.Now())
		if left <= 0 {
			return nil, false, fmt.Errorf("load: %w: %w", ErrWaitTimeout, d.localLocked(key))
		}
		ch := d.waitCh(key)
		d.mu.Unlock()
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
	return &LockedError{Key: key, Holder: d.node.jobID, Local: true, Presence: d.presenceFlag()}
}

// endSessionLocked ends a live session on its own: the game hears it through
// Kick, and the driver runs the leave cleanups and the release save. d.mu
// must be held.
func (d *Driver[T]) endSessionLocked(p *Profile[T], reason string) {
	if p.state != stateActive {
		return
	}
	p.state = stateLeaving
	d.notify(p.key)
	d.goTracked(func() {
		if d.cfg.Kick != nil {
			d.cfg.Kick(p.key, reason)
		}
		p.runCleanups()
		_ = p.release(d.ctx)
	})
}

// adopt re-asserts a retained profile for a rejoin: the release request is
// dropped and a save runs at once under a fresh token (an adoption is a new
// session, so a late request naming the old lock cannot end it). It reports
// whether the rejoin gets the profile: the save landed, or it failed for a
// reason other than a lost lock (the player keeps playing on the retained
// profile, which is the newest copy, and autosave keeps retrying). When the
// lock is gone the profile ends and the caller loads the record normally.
func (d *Driver[T]) adopt(ctx context.Context, p *Profile[T]) (bool, error) {
	token, err := d.node.newToken()
	if err != nil {
		d.setState(p, stateRetained)
		return false, err
	}
	d.mu.Lock()
	// The lock may still carry any token of adoptions that never landed; keep
	// the last few (each failed rejoin adds one).
	p.earlier = append(p.earlier, p.token)
	if len(p.earlier) > maxEarlierTokens {
		p.earlier = p.earlier[len(p.earlier)-maxEarlierTokens:]
	}
	p.token = token
	clear(p.requesters) // the release request is dropped: requests naming the old lock are late now
	d.mu.Unlock()

	err = p.Save(ctx)
	switch {
	case err == nil:
		d.setState(p, stateActive)
		d.log.Info("rejoin adopted the retained profile", "key", p.key)
		return true, nil
	case errors.Is(err, ErrLockLost):
		d.log.Warn("retained profile lost its lock; loading the record", "key", p.key, "err", err)
		return false, nil
	case ctx.Err() != nil:
		d.setState(p, stateRetained)
		return false, ctx.Err()
	}
	// The save failed without saying why: the backend is down, or its answer
	// was lost. A read tells the two apart when Redis answers: a lock that
	// another server holds now means the retained copy is no longer the
	// newest, and the record must be loaded (and its holder asked) instead.
	if holder, ok := d.heldElsewhere(ctx, p); ok {
		err := fmt.Errorf("adopt %q: %w (the lock is held by %s)", p.key, ErrLockLost, holder)
		p.finish(err)
		d.log.Warn("retained profile lost its lock; loading the record", "key", p.key, "err", err)
		return false, nil
	}
	d.setState(p, stateActive)
	d.log.Warn("rejoin adopted the retained profile but its save failed; autosave keeps retrying",
		"key", p.key, "err", err)
	return true, nil
}

// heldElsewhere reads the lock of p's record and reports whether another
// session holds it (a read, not a state change); false when Redis does not
// answer.
func (d *Driver[T]) heldElsewhere(ctx context.Context, p *Profile[T]) (string, bool) {
	rctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	f, err := d.node.rdb.HMGet(rctx, d.recordKey(p.key), "lock.token", "lock.job", "released").Result()
	if err != nil {
		return "", false
	}
	token, job, released := str(f[0]), str(f[1]), str(f[2])
	d.mu.Lock()
	defer d.mu.Unlock()
	ours := func(t string) bool { return t == p.token || slices.Contains(p.earlier, t) }
	switch {
	case token == "" && (released == "" || ours(released)):
		return "", false // free, and the last release was ours: the next save retakes it
	case token == "":
		return "nobody (another session came and went)", true
	case ours(token):
		return "", false
	}
	return job, true
}

// maxEarlierTokens bounds the earlier tokens a profile keeps while its
// adoptions have not landed.
const maxEarlierTokens = 8

// setState moves a profile that is not closed to s and wakes waiters.
func (d *Driver[T]) setState(p *Profile[T], s pstate) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.state != stateClosed {
		p.state = s
		d.notify(p.key)
	}
}

// acquire takes key's lock for a new profile, waiting on another server's
// lock until deadline when wait is true.
func (d *Driver[T]) acquire(ctx context.Context, key string, deadline time.Time, wait bool) (*Profile[T], error) {
	token, err := d.node.newToken()
	if err != nil {
		return nil, err
	}
	var w *lockhandoff.Wait
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	var at lockhandoff.Attempt
	var lastLock *LockedError
	for {
		// A lock with the presence flag is taken under a lease generation,
		// and lives only as long as it (see lease.go).
		gen, err := d.awaitLease(ctx, deadline, wait)
		if err != nil {
			return nil, err
		}
		sentAt := d.node.clock.Now()
		a, l, err := d.acquireOnce(ctx, key, token, at)
		switch {
		case err != nil:
			return nil, err
		case a != nil && gen != 0 && !d.node.presence.Holds(gen):
			// The lease lapsed while the lock was being taken: another server
			// may read this one as stopped, so the lock is not safe to use.
			d.giveBack(key, token, nil)
			return nil, fmt.Errorf("load %q: %w: the presence lease lapsed while the lock was taken", key, ErrFenced)
		case a != nil:
			return d.newProfile(ctx, key, token, a, gen, sentAt)
		}
		lastLock = &LockedError{Key: key, Holder: l.job, Age: l.age, Presence: l.presence}
		if l.job == d.node.jobID && at.StealJob == "" && at.NotAliveToken == "" {
			// Our own JobID, but no session of ours holds it: an earlier run of
			// this server (a restarted process that kept its JobID) left it.
			at = lockhandoff.Attempt{StealJob: l.job, StealToken: l.token}
			continue
		}
		if !wait {
			return nil, fmt.Errorf("load: %w", lastLock)
		}
		if w == nil {
			w = d.node.handoff.NewWait(d.cfg.Name, key, deadline, d.presenceFlag())
		}
		at, err = w.Next(ctx, lockhandoff.Lock{Job: l.job, Token: l.token, Presence: l.presence,
			Age: l.age, MaxAge: d.cfg.LockTTL + d.cfg.LockSkew})
		if err != nil {
			if errors.Is(err, lockhandoff.ErrDeadline) {
				return nil, fmt.Errorf("load: %w: %w", ErrWaitTimeout, lastLock)
			}
			return nil, err
		}
	}
}

// acquireOnce runs acquire.lua once: the record when the lock was taken, or
// the lock that stopped it.
func (d *Driver[T]) acquireOnce(ctx context.Context, key, token string, at lockhandoff.Attempt) (*acquired, lockState, error) {
	maxAge := (d.cfg.LockTTL + d.cfg.LockSkew).Milliseconds()
	presence := "0"
	if d.presenceFlag() {
		presence = "1"
	}
	v, err := d.node.scripts.acquire.Run(ctx, d.node.rdb, []string{d.recordKey(key)},
		d.node.jobID, token, presence, maxAge, at.StealJob, at.StealToken, at.NotAliveToken, recordFormat).Result()
	if err != nil {
		return nil, lockState{}, fmt.Errorf("acquire %q: %w", key, err)
	}
	arr, tag, err := answer(v)
	if err != nil {
		return nil, lockState{}, fmt.Errorf("acquire %q: %w", key, err)
	}
	switch tag {
	case "OK":
		a := parseAcquired(arr)
		return &a, lockState{}, nil
	case "LOCKED":
		return nil, parseLocked(arr), nil
	case "FORMAT":
		return nil, lockState{}, &CorruptRecordError{Key: key,
			Err: fmt.Errorf("record format %s is newer than this build's %d", str(elem(arr, 1)), recordFormat)}
	}
	return nil, lockState{}, fmt.Errorf("acquire %q: unexpected answer %q", key, tag)
}

// newProfile builds the profile for a record whose lock was just taken. A
// record that does not decode is given back (its lock released, its data
// untouched) and answered with a *CorruptRecordError.
func (d *Driver[T]) newProfile(ctx context.Context, key, token string, a *acquired, gen uint64, sentAt time.Time) (*Profile[T], error) {
	switch a.how {
	case "stolen":
		d.log.Warn(fmt.Sprintf("took the lock of %s from server %s, which stopped beating presence", key, a.prevJob),
			"key", key, "from", a.prevJob)
	case "own":
		d.log.Warn("took over a lock left by an earlier run of this JobID", "key", key)
	case "expired":
		d.log.Warn("took a stale lock", "key", key, "from", a.prevJob)
	}
	var derr error
	if a.trade != "" {
		derr = d.recoverTrade(ctx, key, token, a)
	}
	var data T
	if derr == nil {
		data, derr = d.codec.decode(a.data)
	}
	p := &Profile[T]{
		d:          d,
		key:        key,
		data:       data,
		saveLock:   make(chan struct{}, 1),
		done:       make(chan struct{}),
		state:      stateActive,
		token:      token,
		epoch:      a.epoch,
		ver:        a.ver,
		lastData:   a.data,
		requesters: make(map[string]struct{}),
		leaseGen:   gen,
		ageUntil:   sentAt.Add(d.cfg.LockTTL),
	}
	p.ctx, p.cancel = context.WithCancel(d.ctx)
	if derr == nil {
		derr = p.decodeMeta(a.uids, a.meta)
	}
	if derr != nil {
		var cerr *CorruptRecordError
		if !errors.As(derr, &cerr) && a.trade == "" {
			derr = &CorruptRecordError{Key: key, Err: derr}
		}
		p.abandon()
		d.giveBack(key, token, nil) // without writing data (a trade mark stays)
		return nil, derr
	}
	return p, nil
}

// abandon ends a profile that was never handed out.
func (p *Profile[T]) abandon() {
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	p.finishLocked(ErrClosed)
}

// presenceFlag reports whether this driver's locks carry presence=1: the
// Node beats presence and the driver has handoff on.
func (d *Driver[T]) presenceFlag() bool {
	return d.node.handoff.Active() && !d.cfg.DisableHandoff
}

// lockLost tells the game a profile lost its lock.
func (d *Driver[T]) lockLost(key string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lockLostLocked(key, err, ReasonLockLost)
}

// lockLostLocked tells the game, on a goroutine of its own, that a profile
// lost its lock, with the Kick reason. d.mu held.
func (d *Driver[T]) lockLostLocked(key string, err error, reason string) {
	d.goTracked(func() {
		if d.cfg.Kick != nil {
			d.cfg.Kick(key, reason)
		}
		if d.cfg.OnLockLost != nil {
			d.cfg.OnLockLost(key, err)
		}
	})
}
