package datadriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// The remote side of a load: take the record's lock, or wait for the
// server holding it to let it go (handoffcore.Wait), then build the
// profile from what the acquire read.

// acquire takes key's lock for a new profile, waiting on another server's
// lock until deadline when wait is true.
func (d *Driver[T]) acquire(ctx context.Context, key string, deadline time.Time, spec loadSpec, note *joinNote) (*Profile[T], error) {
	wait := spec.remoteWait > 0
	token, err := d.node.newToken()
	if err != nil {
		return nil, err
	}
	var w *handoffcore.Wait
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	args := record.AcquireArgs{Job: d.node.jobID, Token: token, Presence: d.presenceFlag(),
		MaxAge: d.cfg.LockTTL + d.cfg.LockSkew, Skew: d.cfg.LockSkew, Format: record.Format, Schema: d.codec.Version()}
	if d.cfg.OnMessage != nil {
		args.MaxMessages, args.MaxMessageBytes, args.MessagesPerRead = d.cfg.MaxInbox, inboxPageBytes, d.inboxPage()
	}
	for {
		// A lock with the presence flag is taken under a lease generation,
		// and lives only as long as it (see lease.go).
		gen, err := d.awaitLease(ctx, deadline, wait)
		if err != nil {
			return nil, err
		}
		sentAt := d.node.clock.Now()
		res, err := d.acquireOnce(ctx, key, args)
		if err != nil {
			return nil, err
		}
		if err := d.refused(key, &res); err != nil {
			return nil, err
		}
		if res.Outcome == record.Acquired {
			if gen != 0 && !d.node.presence.Holds(gen) {
				// The lease lapsed while the lock was being taken: another
				// server may read this one as stopped, so the lock is not safe
				// to use.
				d.giveBackSoon(key, token, nil)
				return nil, fmt.Errorf("load %q: %w: the presence lease lapsed while the lock was taken", key, ErrFenced)
			}
			note.how = res.How
			return d.newProfile(ctx, key, token, &res, gen, sentAt, spec.mode)
		}
		l := res.Lock
		if l.Job == d.node.jobID && args.StealJob == "" && d.node.claimedSince(sentAt.Add(-l.Age)) {
			// Our own JobID, but no session of ours holds it, and the lock was
			// written before this process claimed the JobID (which proves the
			// instance that wrote it stopped): an earlier run of this server
			// (a restarted process that kept its JobID) left it.
			args.StealJob, args.StealToken = l.Job, l.Token
			d.tel.TakeoverDecision(ctx, telemetry.TakeoverOwnRun, l.Job)
			continue
		}
		if !wait {
			return nil, fmt.Errorf("load: %w", lockedError(key, l, false))
		}
		if w == nil {
			w = d.node.handoff.NewWaitFor(d.cfg.Name, key, deadline, d.presenceFlag(), spec.purpose())
			note.waitedRemote = true
			ctx = d.tel.StartWait(ctx, telemetry.WaitOtherServer)
			d.log.Debug("load waits for another server's lock", "key", key, "holder", l.Job, "presence", l.Presence,
				"age", l.Age)
		}
		at, err := w.Next(ctx, handoffcore.Lock(l))
		if err != nil {
			if errors.Is(err, handoffcore.ErrDeadline) {
				return nil, fmt.Errorf("load: %w: %w", ErrWaitTimeout, lockedError(key, l, false))
			}
			return nil, err
		}
		args.StealJob, args.StealToken = at.StealJob, at.StealToken
		if at.StealJob != "" {
			d.tel.TakeoverDecision(ctx, telemetry.TakeoverStopped, at.StealJob)
		}
	}
}

// refused is the error of an acquire that refused the record itself (a
// newer format or schema, a broken field), nil for any other answer.
func (d *Driver[T]) refused(key string, res *record.AcquireResult) error {
	switch res.Outcome {
	case record.FormatTooNew:
		return fmt.Errorf("load %q: %w: record format %s is newer than this build's %d", key, ErrSchemaTooNew, res.Format,
			record.Format)
	case record.SchemaTooNew:
		return fmt.Errorf("load %q: %w: the record may only be read at schema version %d or later, "+
			"and this driver's is %d (len(Migrations))", key, ErrSchemaTooNew, res.SchemaMin, d.codec.Version())
	case record.Corrupt:
		return d.corruptField(key, res.Corrupt)
	}
	return nil
}

// acquireOnce makes one acquire call, bounded by SaveTimeout so a call that
// hangs keeps a join at most that long past its wait. A call that fails
// without an answer may still have taken the lock (it landed and its answer
// was lost, or it lands later): the lock is given back in the background,
// fenced by the token, and a release request naming it later gives it back
// again (releaseOrphanLocked), so no lock is left that no session uses.
func (d *Driver[T]) acquireOnce(ctx context.Context, key string, args record.AcquireArgs) (record.AcquireResult, error) {
	cctx, cancel := d.node.bounds.within(ctx, d.node.cfg.SaveTimeout+d.node.cfg.ReplicaTimeout)
	defer cancel()
	actx, span := d.tel.StartAcquire(cctx)
	call := args.Call(d.recordKey(key))
	v, acked, err := d.node.runReplicated(actx, call.Call)
	res, err := call.Answer(v, err)
	if want := d.node.cfg.MinReplicas; err == nil && res.Outcome == record.Acquired && want > 0 && acked < int64(want) {
		// A lock that a failover could lose is no lock: another server could
		// take the key from the promoted replica while this one plays it.
		err = fmt.Errorf("%w: %d of %d replicas acknowledged the lock within %s", ErrNotReplicated, acked, want,
			d.node.cfg.ReplicaTimeout)
	}
	span.End(acquireOutcome(res.Outcome), res.Lock.Job, err)
	if err == nil {
		return res, nil
	}
	d.orphans.remember(args.Token)
	d.giveBackLater(key, args.Token, nil)
	if ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("%w (no answer within SaveTimeout %s)", err, d.node.cfg.SaveTimeout)
	}
	return res, fmt.Errorf("acquire %q: %w", key, err)
}

// newProfile builds the profile for a record whose lock was just taken. A
// record that does not decode is given back (its lock released, its data
// untouched) and answered with a *CorruptRecordError (or a *MigrationError),
// unless restoring, when the profile is marked corrupt instead. A profile
// loaded for a wipe is never decoded.
func (d *Driver[T]) newProfile(ctx context.Context, key, token string, a *record.AcquireResult, gen uint64,
	sentAt time.Time, mode loadMode) (*Profile[T], error) {
	switch a.How {
	case record.TakenStolen:
		d.tel.Takeover(ctx, telemetry.TakeoverStopped)
		d.log.Warn(fmt.Sprintf("took the lock of %s from server %s, which stopped beating presence", key, a.PrevJob),
			"key", key, "from", a.PrevJob)
	case record.TakenOwn:
		d.tel.Takeover(ctx, telemetry.TakeoverOwnRun)
		d.log.Warn("took over a lock left by an earlier run of this JobID", "key", key)
	case record.TakenExpired:
		d.tel.Takeover(ctx, telemetry.TakeoverAged)
		d.log.Warn("took a stale lock", "key", key, "from", a.PrevJob)
	}
	var derr error
	if a.Trade != "" {
		// The acquire and the recovery of the trade it found share one
		// SaveTimeout, so that a journal call that hangs keeps the join no
		// longer than a hanging acquire would (its bound: the wait's deadline
		// plus SaveTimeout).
		rctx, cancel := d.node.clock.WithDeadline(ctx, sentAt.Add(d.node.cfg.SaveTimeout))
		derr = d.recoverTrade(rctx, key, token, a)
		cancel()
	}
	var (
		data    T
		unknown *datacodec.Unknown
		corrupt bool
	)
	switch {
	case derr != nil:
	case mode == loadWipe:
		corrupt = true // never decoded, never written: Wipe erases it
	default:
		data, unknown, corrupt, derr = d.decodeLoaded(key, a, mode == loadRestore)
	}
	p := &Profile[T]{
		d:        d,
		key:      key,
		data:     data,
		leaseGen: leaseGenOf(gen),
		w: writer{ver: a.Ver, data: d.dig.storedOf(a.Data), schema: int32(a.Schema), schemaMin: int32(a.SchemaMin),
			stored: metaOf(record.KeptMeta{At: a.At, Schema: a.Schema, SchemaMin: a.SchemaMin}),
			histAt: wallNS(a.HistAt), redis: d.redisClockOf(a.Now, sentAt)},
	}
	p.setUnknown(unknown)
	p.w.set(flagCorrupt, corrupt)
	p.w.setStored(a.UserIDs, a.Meta)
	p.initLife(token, a.Epoch)
	p.touch(sentAt)
	seen := int64(0)
	if !a.MoreMessages {
		seen = a.InboxSeq // the acquire read the whole inbox
	}
	p.w.setInboxSeqs(a.InboxSeq, seen)
	if n := len(a.Messages); n > 0 {
		p.w.made().joinedTo = a.Messages[n-1].ID
	}
	if derr == nil && mode != loadWipe {
		if derr = p.decodeMeta(a.UserIDs, a.Meta); derr != nil {
			derr = &CorruptRecordError{Key: key, Path: "(user ids and metadata)", Err: derr}
		}
	}
	if derr != nil {
		p.abandon()
		d.giveBackSoon(key, token, nil) // without writing data (a trade mark stays)
		return nil, derr
	}
	if !corrupt {
		p.applyMessages(a.Messages) // before Join returns; saved by the owner's first write
	}
	return p, nil
}

// abandon ends a profile that was never handed out (its owner never ran).
func (p *Profile[T]) abandon() { p.endWith(causeClosed, ErrClosed) }

// decodeLoaded checks the acquired record against its checksum and decodes
// its data. A record that does not check or decode answers a
// *CorruptRecordError (or a *MigrationError), unless restoring, when it is
// reported corrupt instead (RestoreAt writes a kept version over it).
func (d *Driver[T]) decodeLoaded(key string, a *record.AcquireResult, restoring bool) (
	data T, unknown *datacodec.Unknown, corrupt bool, err error) {
	if err = checkStored(key, a.Stored()); err == nil {
		if data, unknown, err = d.codec.Decode(a.Data, a.Schema); err != nil {
			err = decodeErr(key, err)
		}
	}
	var cerr *CorruptRecordError
	if restoring && errors.As(err, &cerr) {
		d.log.Warn("loaded a corrupt record for a restore", "key", key, "err", err)
		return data, unknown, true, nil
	}
	return data, unknown, false, err
}

// acquireOutcome classes an acquire's answer for its span.
func acquireOutcome(o record.AcquireOutcome) telemetry.AcquireOutcome {
	switch o {
	case record.Acquired:
		return telemetry.AcquireTaken
	case record.Locked:
		return telemetry.AcquireLocked
	case record.FormatTooNew, record.SchemaTooNew:
		return telemetry.AcquireTooNew
	}
	return telemetry.AcquireError
}
