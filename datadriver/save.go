package datadriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// writeRes is the answer of a save.lua call that was accepted, and when the
// call was sent (lock.at is at least that: see touchLocked).
type writeRes struct {
	record.SaveResult
	sentAt time.Time
}

// saveArgs completes a's fields that are the driver's: its JobID, presence
// flag and history.
func (d *Driver[T]) saveArgs(a record.SaveArgs) record.SaveArgs {
	a.Job, a.Presence, a.History = d.node.jobID, d.presenceFlag(), d.cfg.History
	return a
}

// write runs save.lua for key: one round trip, bounded by the Node's
// SaveTimeout. A write that was refused is an error matching ErrLockLost
// (the lock is another's) or ErrTradePending (another trade holds the
// record).
func (d *Driver[T]) write(ctx context.Context, key string, a record.SaveArgs) (writeRes, error) {
	ctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	sentAt := d.node.clock.Now()
	res, err := record.Save(ctx, d.node.rdb, d.recordKey(key), d.saveArgs(a))
	return writeResult(key, a.Mode, res, err, sentAt)
}

// writeWait is write, then WAIT for MinReplicas replicas on the same
// connection: it also returns how many acknowledged.
func (d *Driver[T]) writeWait(ctx context.Context, key string, a record.SaveArgs) (writeRes, int64, error) {
	ctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout+d.node.cfg.ReplicaTimeout)
	defer cancel()
	sentAt := d.node.clock.Now()
	v, acked, err := d.node.runReplicated(ctx, d.writeCall(key, a))
	var res record.SaveResult
	if err == nil {
		res, err = record.ParseSave(v)
	}
	w, err := writeResult(key, a.Mode, res, err, sentAt)
	return w, acked, err
}

// writeCall is save.lua's call for a, to run in a pipeline (see
// writeResult for its answer).
func (d *Driver[T]) writeCall(key string, a record.SaveArgs) rscript.Call {
	return d.saveArgs(a).Call(d.recordKey(key))
}

// writeResult turns a save.lua answer (or the call's error) into a writeRes
// or an error.
func writeResult(key string, mode record.WriteMode, res record.SaveResult, err error, sentAt time.Time) (writeRes, error) {
	if err != nil {
		return writeRes{}, fmt.Errorf("%s %q: %w", mode, key, err)
	}
	switch res.Outcome {
	case record.LockLost:
		holder := res.Holder.Job
		if holder == "" {
			holder = "nobody"
		}
		return writeRes{}, fmt.Errorf("%s %q: %w (the lock is held by %s)", mode, key, ErrLockLost, holder)
	case record.TradeHeld:
		return writeRes{}, fmt.Errorf("%s %q: %w (%s)", mode, key, ErrTradePending, res.Trade)
	}
	return writeRes{SaveResult: res, sentAt: sentAt}, nil
}

// Save writes the profile to Redis now, fenced by its lock, and refreshes
// the lock's age. It returns an error matching ErrLockLost when another
// server holds the lock or this server fenced itself off (ErrFenced; the
// profile then ends: Done closes), ErrTooLarge
// when the data exceeds MaxDataBytes (nothing written), ErrReleased after a
// release, or the backend's error (the profile stays live; autosave
// retries). ctx bounds the wait for a running save and the save itself.
func (p *Profile[T]) Save(ctx context.Context) error {
	if err := p.lockSave(ctx); err != nil {
		return err
	}
	defer p.unlockSave()
	return p.saveLocked(ctx, record.ModeSave, true)
}

// Release ends the session: it runs the leave cleanups, then the release
// save, which writes the data and clears the lock in one round trip. On
// success the profile ends (Done closes, Err is ErrReleased). When the save
// fails the profile is retained, still holding the lock: a rejoin on this
// Node adopts it with everything earned, a request from another server
// retries the release at once, and the autosave loop retries it too.
// Release is idempotent: after a successful release it returns nil.
//
// A release of data over MaxDataBytes frees the lock with the last data
// that fit and returns an error matching ErrTooLarge (the profile ends,
// released). A leave cleanup that panics leaves the data as it was before
// the cleanups; the release saves that and returns an error matching
// ErrCallbackPanic.
func (p *Profile[T]) Release(ctx context.Context) error {
	d := p.d
	d.mu.Lock()
	switch p.state {
	case stateClosed:
		err := p.err
		d.mu.Unlock()
		if errors.Is(err, ErrReleased) {
			return nil
		}
		return err
	case stateActive:
		p.state = stateLeaving
		d.notify(p.key)
	}
	d.mu.Unlock()
	cerr := p.runCleanups()
	err := p.release(ctx)
	if err == nil && cerr != nil {
		return fmt.Errorf("release %q: a leave cleanup failed, so the data as it was before the cleanups was saved: %w",
			p.key, cerr)
	}
	return err
}

// release runs the release save and settles the profile's state.
func (p *Profile[T]) release(ctx context.Context) error {
	d := p.d
	if err := p.lockSave(ctx); err != nil {
		d.retain(p, err)
		return err
	}
	err := p.saveLocked(ctx, record.ModeRelease, true)
	p.unlockSave()
	var landed *landedButErr
	if err == nil || errors.As(err, &landed) {
		p.finish(ErrReleased)
		d.log.Debug("profile released", "key", p.key)
		return err
	}
	if perr := p.Err(); perr != nil { // ended meanwhile: released before, or lost
		if errors.Is(perr, ErrReleased) {
			return nil
		}
		return err
	}
	d.retain(p, err)
	return err
}

// retain marks a profile whose release failed as retained.
func (d *Driver[T]) retain(p *Profile[T], err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.state == stateLeaving {
		p.state = stateRetained
		d.notify(p.key)
		d.log.Warn("release failed; profile retained under its lock", "key", p.key, "err", err)
	}
}

// saveLocked runs one save or release; the caller holds the save slot. A
// durable one (an explicit Save, a release) waits for MinReplicas replicas.
func (p *Profile[T]) saveLocked(ctx context.Context, mode record.WriteMode, durable bool) error {
	d := p.d
	d.mu.Lock()
	if p.state == stateClosed {
		err := p.err
		d.mu.Unlock()
		return err
	}
	if err := p.checkLeaseLocked(); err != nil {
		d.mu.Unlock()
		return err
	}
	p.saving = true
	corrupt, keepAlways := p.corrupt, p.keepNext
	p.keepNext = false
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		p.saving = false
		d.notify(p.key)
		d.mu.Unlock()
	}()

	trade, err := p.resolvePending(ctx)
	if err != nil {
		return fmt.Errorf("%s %q: %w", mode, p.key, err)
	}
	d.mu.Lock()
	req := record.SaveArgs{Mode: mode, Token: p.token, Earlier: p.earlier, Trade: trade}
	d.mu.Unlock()

	snap, err := p.snapshot()
	if err != nil {
		return fmt.Errorf("%s %q: encode: %w", mode, p.key, err)
	}
	if corrupt {
		// A corrupt record loaded for a restore: its data was never decoded,
		// so it is never written (a release gives the lock back untouched).
		snap = snapshot{data: p.lastData}
	}
	var tooLarge error
	if len(snap.data) > d.cfg.MaxDataBytes {
		tooLarge = fmt.Errorf("%s %q: %w: %d bytes, limit %d", mode, p.key, ErrTooLarge, len(snap.data), d.cfg.MaxDataBytes)
		if mode != record.ModeRelease {
			return tooLarge
		}
		// A release frees the lock all the same, with the last data that
		// fit (and without the messages it applied, which stay in the
		// inbox), so that the player can join anywhere at once.
		snap.data, snap.applied = p.lastData, nil
	}
	if !bytes.Equal(snap.data, p.lastData) {
		req.Data = snap.data
		req.Schema, req.SchemaMin = d.codec.WriteVersion(p.schema, p.schemaMin)
		if keepAlways || p.versionDue() {
			req.Keep, req.KeepVer, req.KeepAlways = d.compress(p.lastData), p.ver, keepAlways
		}
	}
	if snap.uids != nil {
		req.Meta = &record.Meta{UserIDs: snap.uids, Meta: snap.meta}
	}
	req.Applied = snap.applied

	kind := telemetry.WriteAutosave
	switch {
	case mode == record.ModeRelease:
		kind = telemetry.WriteRelease
	case durable:
		kind = telemetry.WriteSave
	}
	wctx, span := d.tel.StartWrite(ctx, kind, p.key)
	started := d.node.clock.Now()
	var res writeRes
	var acked int64
	if durable && d.node.cfg.MinReplicas > 0 {
		res, acked, err = d.writeWait(wctx, p.key, req)
	} else {
		res, err = d.write(wctx, p.key, req)
	}
	span.End(writeOutcome(err), d.node.clock.Since(started), err)
	if d.log.Enabled(ctx, slog.LevelDebug) { // the arguments would cost allocations even when not logged
		d.log.Debug("write", "key", p.key, "mode", string(mode), "data_bytes", len(req.Data), "err", err)
	}
	if err != nil {
		if errors.Is(err, ErrLockLost) {
			p.finish(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	p.ver, p.lastData = res.Ver, snap.data
	if res.HistAt.After(p.histAt) {
		p.histAt = res.HistAt
	}
	if req.Data != nil {
		p.schema, p.schemaMin = req.Schema, req.SchemaMin
	}
	if trade != "" {
		p.clearPending(trade)
	}
	p.dataMu.Lock()
	if req.Meta != nil {
		p.metaSaved = snap.metaGen
	}
	p.forgetAppliedLocked(snap.applied)
	p.dataMu.Unlock()
	d.mu.Lock()
	p.landedLocked(res)
	p.noteInboxLocked(res.InboxSeq)
	d.mu.Unlock()
	if res.Moved {
		d.log.Info("lock re-asserted", "key", p.key, "epoch", res.Epoch, "how", res.How)
	}
	if tooLarge != nil {
		return &landedButErr{fmt.Errorf("%w (released with the last data that fit)", tooLarge)}
	}
	if want := d.node.cfg.MinReplicas; durable && want > 0 && acked < int64(want) {
		return &landedButErr{fmt.Errorf("%s %q: %w: %d of %d replicas acknowledged within %s",
			mode, p.key, ErrNotReplicated, acked, want, d.node.cfg.ReplicaTimeout)}
	}
	return nil
}

// landedButErr is a write that landed, with something to report: a release
// of data over MaxDataBytes that freed the lock with the last data that fit
// (ErrTooLarge), or a durable write fewer replicas than MinReplicas
// acknowledged (ErrNotReplicated). A release so reported is a release.
type landedButErr struct{ err error }

func (e *landedButErr) Error() string { return e.err.Error() }
func (e *landedButErr) Unwrap() error { return e.err }

// writeOutcome classes a write's error for its metric.
func writeOutcome(err error) telemetry.WriteOutcome {
	switch {
	case err == nil:
		return telemetry.WriteOK
	case errors.Is(err, ErrLockLost):
		return telemetry.WriteLockLost
	case errors.Is(err, ErrTooLarge):
		return telemetry.WriteTooLarge
	case errors.Is(err, ErrTradePending):
		return telemetry.WriteTradePending
	case errors.Is(err, context.DeadlineExceeded):
		return telemetry.WriteTimeout
	}
	return telemetry.WriteError
}
