package datadriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// errRecordGone: a write found the profile's record gone (deleted by
// another tool, flushed or evicted while held).
var errRecordGone = errors.New("the record vanished from Redis while held (deleted, flushed or evicted)")

// errSuperseded: a write arrived after a later write of its session had
// landed (sent before it, delivered after it), and was refused.
var errSuperseded = errors.New("a later write of the session landed first; this late one was refused")

// snapshot is what a write sends, taken at one instant: the encoded data,
// the user ids and metadata when they changed since the last landed save
// (nil otherwise) with their change count, and the messages the data has
// applied and refused.
type snapshot struct {
	data, uids, meta []byte
	// stored is what the executor keeps of data once a write of it lands,
	// computed once per snapshot: whether data changed, and its checksum.
	stored  storedData
	metaGen uint64
	updates uint64 // Profile.Updates when it was taken
	applied []string
	refused []record.Refusal
}

// snapshot takes what a write sends, or says why nothing may be written: the
// session stopped (a change failed halfway, or it ended) or its lease
// passed. Checked under dataMu, so that an Update that failed never has its
// change taken.
func (p *Profile[T]) snapshot() (snapshot, error) {
	s, err := p.snapshotLocked()
	if err == nil {
		s.stored = p.d.dig.storedOf(s.data) // outside dataMu: Updates need not wait for the digest
	}
	return s, err
}

// snapshotLocked is snapshot's part under dataMu.
func (p *Profile[T]) snapshotLocked() (snapshot, error) {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	if p.state.stopped() {
		if err := p.Err(); err != nil {
			return snapshot{}, err
		}
		return snapshot{}, fmt.Errorf("%q: %w: a change failed halfway; nothing more of this session is written",
			p.key, ErrLockLost)
	}
	if err := p.leaseErr(p.d.node.clock.Now()); err != nil {
		return snapshot{}, err
	}
	s := snapshot{updates: p.updates.Load()}
	x := p.extras()
	var err error
	if s.data, err = p.d.codec.Encode(&p.data, x.unknownData()); err != nil || x == nil {
		return s, err
	}
	s.metaGen, s.applied, s.refused = x.metaGen, slices.Clone(x.applied), slices.Clone(x.refused)
	if s.metaGen == x.metaSaved {
		return s, nil
	}
	if s.uids, err = msgpack.Marshal(x.uids); err != nil {
		return s, err
	}
	s.meta, err = msgpack.Marshal(x.meta)
	return s, err
}

// write runs one save.lua call for the profile (on its owner, or a trade
// borrowing it): the data when it changed since the last landed write, the
// messages applied and refused since then, and the lock's timestamp; a
// release also clears the lock, a refresh sends no data. An error that ends
// the session (the lock is another's, the record is gone or broken, the
// lease passed) ends it here, and carries its cause.
func (p *Profile[T]) write(ctx context.Context, kind writeKind) error {
	d := p.d
	mode := kind.mode()
	if p.ended.Load() != nil {
		return p.Err()
	}
	trade, err := p.resolvePending(ctx)
	if err != nil {
		return fmt.Errorf("%s %q: %w", mode, p.key, err)
	}
	if trade != "" && !kind.carriesData() {
		// The write that clears a trade's mark carries the data, which holds
		// the trade's image when it committed: a refresh would clear the
		// mark and leave the record's data from before the trade.
		kind = writeAutosave
	}
	req, snap, tooLarge, err := p.buildWrite(kind, trade)
	if err != nil {
		p.fenceOn(err)
		return err
	}
	trade = req.Trade // "" when the write leaves the mark to the next load
	durable := kind.durable()
	wctx, span := d.tel.StartWrite(ctx, kind.metric(), p.key)
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
		p.fenceOn(err)
		if ctx.Err() != nil && causeOf(err) == causeNone {
			return ctx.Err()
		}
		return err
	}
	p.landed(req, snap, res, trade)
	var notReplicated error
	want := d.node.cfg.MinReplicas
	if durable && want > 0 && acked < int64(want) {
		notReplicated = &landedButErr{fmt.Errorf("%s %q: %w: %d of %d replicas acknowledged within %s",
			mode, p.key, ErrNotReplicated, acked, want, d.node.cfg.ReplicaTimeout)}
	}
	if kind.carriesData() { // a refresh writes no data; an autosave waits for no replica
		replicated := want == 0 || (durable && notReplicated == nil)
		p.noteSaved(snap, tooLarge == nil && !p.w.has(flagCorrupt), mode == record.ModeRelease, replicated)
	}
	if tooLarge != nil {
		return &landedButErr{fmt.Errorf("%w (released with the last data that fit)", tooLarge)}
	}
	return notReplicated
}

// buildWrite makes the arguments of one write. A release of data over
// MaxDataBytes frees the lock with the last data that fit (tooLarge says
// so); a save of it is refused.
func (p *Profile[T]) buildWrite(kind writeKind, trade string) (
	record.SaveArgs, snapshot, error, error) {
	d := p.d
	mode := kind.mode()
	v := p.view()
	req := record.SaveArgs{Mode: mode, Seq: p.w.nextSeq(), Token: v.token, Earlier: v.earlierTokens(), Trade: trade,
		MaxAttempts: d.cfg.MaxMessageAttempts}
	if !kind.carriesData() {
		if err := p.leaseErr(d.node.clock.Now()); err != nil {
			return req, snapshot{}, nil, err
		}
		return req, snapshot{}, nil, nil
	}
	snap, err := p.snapshot()
	if err != nil {
		return req, snap, nil, err
	}
	if p.w.has(flagCorrupt) {
		// A corrupt record loaded for a restore: its data was never decoded,
		// so it is never written (a release gives the lock back untouched).
		snap = snapshot{}
	}
	var tooLarge error
	if len(snap.data) > d.cfg.MaxDataBytes {
		tooLarge = fmt.Errorf("%s %q: %w: %d bytes, limit %d", mode, p.key, ErrTooLarge, len(snap.data), d.cfg.MaxDataBytes)
		if mode != record.ModeRelease {
			return req, snap, nil, tooLarge
		}
		// The lock goes free all the same, with the last data that fit (and
		// without the messages it applied, which stay in the inbox), so that
		// the player can join anywhere at once. It leaves a trade's mark
		// (the script keeps it on a release without data): the data that
		// fit is from before the trade, and the next load settles the
		// trade's image from its journal.
		snap.data, snap.applied = nil, nil
		req.Trade = ""
	}
	if snap.data != nil && snap.stored != p.w.data {
		req.Data = snap.data
		req.Schema, req.SchemaMin = d.codec.WriteVersion(int(p.w.schema), int(p.w.schemaMin))
		if p.w.has(flagKeepNext) || p.versionDue() {
			if err := p.keepVersion(&req); err != nil {
				return req, snap, nil, err
			}
		}
	}
	if snap.uids != nil {
		req.Meta = &record.Meta{UserIDs: snap.uids, Meta: snap.meta}
	}
	req.Sum = p.sumOf(req, snap)
	req.Applied, req.Refused = snap.applied, snap.refused
	return req, snap, tooLarge, nil
}

// sumOf is the record's checksum after req, a write that sends data or
// user ids and metadata ("" for one that sends neither): of what it
// writes (req.Data is snap's), and of what it leaves as stored.
func (p *Profile[T]) sumOf(req record.SaveArgs, snap snapshot) string {
	if req.Data == nil && req.Meta == nil {
		return ""
	}
	w := &p.w
	data, schema, schemaMin := w.data.sum, int(w.stored.schema), int(w.stored.schemaMin)
	uids, meta := w.asStored()
	if req.Data != nil {
		data, schema, schemaMin = snap.stored.sum, req.Schema, req.SchemaMin
	}
	if req.Meta != nil {
		uids, meta = req.Meta.UserIDs, req.Meta.Meta
	}
	return record.RecordSumAfter(data, schema, schemaMin, uids, meta)
}

// landed records a write of the profile that landed.
func (p *Profile[T]) landed(req record.SaveArgs, snap snapshot, res writeRes, trade string) {
	d := p.d
	w := &p.w
	w.ver = res.Ver
	if req.Data != nil {
		w.data = snap.stored
		w.schema, w.schemaMin = int32(req.Schema), int32(req.SchemaMin)
		w.stored = metaOf(record.KeptMeta{At: res.At, Schema: req.Schema, SchemaMin: req.SchemaMin})
		w.set(flagKeepNext, false)
	}
	if req.Meta != nil {
		w.setStored(req.Meta.UserIDs, req.Meta.Meta)
	}
	if res.HistAt.After(wallTime(w.histAt)) {
		w.histAt = wallNS(res.HistAt)
	}
	if pl := req.KeepPlan; pl != nil && res.Planned {
		d.tel.HistoryKept(p.bg(), pl.Bytes, pl.TrimmedCount, pl.TrimmedBytes)
	}
	if trade != "" {
		p.clearPending(trade)
	}
	if x := p.extras(); x != nil { // a write without extras sent no metadata and no messages
		p.dataMu.Lock()
		if req.Meta != nil {
			x.metaSaved = snap.metaGen
		}
		x.applied = slices.DeleteFunc(x.applied, func(id string) bool { return slices.Contains(snap.applied, id) })
		x.refused = slices.DeleteFunc(x.refused, func(r record.Refusal) bool { return slices.Contains(snap.refused, r) })
		p.dataMu.Unlock()
	}
	p.setEpoch(res.Epoch)
	p.landedAt(res.sentAt)
	p.noteInbox(res.InboxSeq)
	p.noteBroken(res.SaveResult)
	if res.Moved {
		d.log.Info("lock re-asserted", "key", p.key, "epoch", res.Epoch, "how", res.How)
	}
	if res.DeadLettered > 0 {
		d.tel.MessagesDeadLettered(p.bg(), res.DeadLettered)
	}
	p.noteTries(snap.refused, res.Tries)
}

// noteBroken logs, once per profile, a history or inbox key another tool
// broke: the write went on without it.
func (p *Profile[T]) noteBroken(res record.SaveResult) {
	d, w := p.d, &p.w
	if res.HistoryUnusable && !w.has(flagWarnedHistory) {
		w.set(flagWarnedHistory, true)
		d.log.Error("the history key is not a hash: saves go on, but keep no version; "+
			d.repairHint(p.key, "history"), "key", p.key)
	}
	if res.VersionSkipped && !w.has(flagWarnedVersion) {
		w.set(flagWarnedVersion, true)
		d.log.Warn("a version was due but not kept: the record's time or schema is not what this server loaded "+
			"(changed by another tool?); the next write keeps one", "key", p.key)
	}
	if res.InboxUnusable && !w.has(flagWarnedInbox) {
		w.set(flagWarnedInbox, true)
		d.log.Error("the inbox key is not a stream: the messages it held are gone with it; "+
			d.repairHint(p.key, "inbox"), "key", p.key)
	}
}

// writeRes is the answer of a save.lua call that was accepted, and when the
// call was sent (lock.at is at least that: see touch).
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
// SaveTimeout. A write that was refused is an error: one that ends the
// session (ErrLockLost: the lock is another's, the record is gone or
// broken) or ErrTradePending (another trade holds the record).
func (d *Driver[T]) write(ctx context.Context, key string, a record.SaveArgs) (writeRes, error) {
	ctx, cancel := d.node.bounds.within(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	sentAt := d.node.clock.Now()
	res, err := record.Save(ctx, d.node.locks(), d.recordKey(key), d.saveArgs(a))
	return d.writeResult(key, a.Mode, res, err, sentAt)
}

// writeWait is write, then WAIT for MinReplicas replicas on the same
// connection: it also returns how many acknowledged.
func (d *Driver[T]) writeWait(ctx context.Context, key string, a record.SaveArgs) (writeRes, int64, error) {
	ctx, cancel := d.node.bounds.within(ctx, d.node.cfg.SaveTimeout+d.node.cfg.ReplicaTimeout)
	defer cancel()
	sentAt := d.node.clock.Now()
	call := d.writeCall(key, a)
	v, acked, err := d.node.runReplicated(ctx, call.Call)
	res, err := call.Answer(v, err)
	w, err := d.writeResult(key, a.Mode, res, err, sentAt)
	return w, acked, err
}

// writeCall is save.lua's call for a, to run in a pipeline (see writeResult
// for what its answer means).
func (d *Driver[T]) writeCall(key string, a record.SaveArgs) rscript.Pending[record.SaveResult] {
	return d.saveArgs(a).Call(d.recordKey(key))
}

// writeResult turns a save.lua answer (or the call's error) into a writeRes
// or an error; an error that ends the session carries its cause.
func (d *Driver[T]) writeResult(key string, mode record.WriteMode, res record.SaveResult, err error, sentAt time.Time) (writeRes, error) {
	if err != nil {
		return writeRes{}, fmt.Errorf("%s %q: %w", mode, key, err)
	}
	switch res.Outcome {
	case record.LockLost:
		holder := res.Holder.Job
		if holder == "" {
			holder = "nobody"
		}
		return writeRes{}, endsSession(causeTaken, fmt.Errorf("%s %q: %w (the lock is held by %s)", mode, key, ErrLockLost, holder))
	case record.TradeHeld:
		return writeRes{}, fmt.Errorf("%s %q: %w (%s)", mode, key, ErrTradePending, res.Trade)
	case record.Gone:
		return writeRes{}, endsSession(causeRecordGone, fmt.Errorf("%s %q: %w: %w", mode, key, ErrLockLost, errRecordGone))
	case record.CorruptRecord:
		return writeRes{}, endsSession(causeRecordCorrupt, fmt.Errorf("%s %q: %w: %w", mode, key, ErrLockLost,
			d.corruptField(key, res.Corrupt)))
	case record.Superseded:
		// Only a write whose caller gave up meets it (a profile sends its
		// next write once the one before answered): nothing was written.
		return writeRes{}, fmt.Errorf("%s %q: %w: write %d of the session landed before it", mode, key,
			errSuperseded, res.LandedSeq)
	}
	return writeRes{SaveResult: res, sentAt: sentAt}, nil
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
