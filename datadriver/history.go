package datadriver

import (
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ckernel/playerdata/internal/record"
)

// History: a kept version is the data a write replaced, in a hash beside
// the record (record.HistoryKey: its own key, in the record's slot). At
// most one version is kept per HistoryEvery, plus the data before each
// restore; History versions are kept in all. A save that keeps no version
// sends nothing more and does not touch the hash.
//
// The newest kept version is stored whole (compressed with zstd by this
// side: Lua cannot), each older one as a delta against the next newer kept
// version (record/delta.go), so a day of versions costs about one copy of
// the data. The write that keeps a new version carries, beside it, the
// previous newest rewritten as a delta against it and the fields the trim
// deletes: this side reads the history once before that write (a read
// outside the write's round trip, once per HistoryEvery), and the script
// follows that plan only if the history is still as read. Kept versions
// change only then, while the current data changes at every save: no later
// save can break a chain.
//
// One version in record.HistChain+1 stays whole, so no read applies more
// than record.HistChain deltas and a damaged version costs at most the
// record.HistChain older ones that depend on it.

// historySlack: a version is sent this much before it is due by the
// driver's reckoning of the Redis clock; the script keeps it only when it is
// due by the Redis clock itself, else it is the next write's.
const historySlack = 5 * time.Second

// historyReadTimeout bounds the read of the history before a write that
// keeps a version: past it the write goes on without a plan, keeping the
// new version and rewriting none (sound, only larger).
const historyReadTimeout = time.Second

// versionDue reports whether the next data write should send the data it
// replaces to be kept. The caller holds the save slot.
func (p *Profile[T]) versionDue() bool {
	w := &p.w
	if p.d.cfg.History <= 0 || w.data.n == 0 {
		return false
	}
	now := p.d.redisTime(w.redis, p.d.node.clock.Now()) // the Redis clock, reckoned
	return now.Sub(wallTime(w.histAt)) >= p.d.cfg.HistoryEvery-historySlack
}

// keepVersion fills the history arguments of req, a data write that keeps
// the data it replaces (version w.ver, read from the record: the executor
// keeps no copy of it): that data whole, and the plan of what else the
// write does to the history (record.History.Plan: the trim, by count and
// by bytes, and the previous newest version rewritten as a delta), from a
// listing of the history (its fields and headers, and the newest version's
// value: no read of the rest) read by one script, then the data by an
// HGET (record.ListForKeep). A version
// whose data could not be read is not kept by this write (the next data
// write tries again), unless the write must keep it (a restore's): then
// the write is not sent. Runs on the owner.
func (p *Profile[T]) keepVersion(req *record.SaveArgs) error {
	d, w := p.d, &p.w
	h, replaced, planned, err := p.listForKeep()
	if err != nil {
		if w.has(flagKeepNext) {
			return fmt.Errorf("%s %q: the data a restore replaces must be kept: %w", req.Mode, p.key, err)
		}
		d.log.Debug("the data a version keeps was not read: the next write keeps it", "key", p.key, "err", err)
		return nil
	}
	req.KeepVer, req.KeepMeta, req.KeepAlways = w.ver, w.stored.kept(), w.has(flagKeepNext)
	req.Keep = record.NewKeptWhole(w.ver, h.Newest(w.ver), req.KeepMeta, replaced, d.zenc)
	if !planned {
		return nil // without a listing, the script trims by count and rewrites nothing
	}
	plan := h.Plan(record.KeepSpec{Ver: w.ver, Data: replaced, Value: req.Keep, Count: d.cfg.History,
		Budget: d.cfg.HistoryBytes, MaxChain: record.HistChain}, d.zdec)
	req.KeepPlan = &plan
	return nil
}

// listForKeep reads, for a write that keeps a version, within
// historyReadTimeout, the history's listing (one script) and the data the
// version keeps (one HGET), or the data alone for a record that never
// kept a version or whose history could not be listed (the version is then
// kept whole, without a plan); planned says whether h is a listing. The
// data must be the data the executor's last landed write left.
func (p *Profile[T]) listForKeep() (h *record.History, data []byte, planned bool, err error) {
	ctx, cancel := p.d.node.clock.WithTimeout(p.bg(), historyReadTimeout)
	defer cancel()
	rk := p.d.recordKey(p.key)
	h = &record.History{}
	if p.w.histAt != 0 {
		var listed record.History
		if listed, data, err = record.ListForKeep(ctx, p.d.node.rdb, rk); err == nil {
			h, planned = &listed, true
		} else {
			p.d.log.Debug("history not listed: the version is kept whole", "key", p.key, "err", err)
		}
	}
	if !planned {
		if data, err = p.d.node.rdb.HGet(ctx, rk, record.FieldData).Bytes(); err != nil {
			return nil, nil, false, fmt.Errorf("read the stored data: %w", err)
		}
	}
	if !p.d.dig.same(p.w.data, data) {
		return nil, nil, false, errStoredDataChanged
	}
	return h, data, planned, nil
}

// newZstd returns the driver's compressor and decompressor, closed with the
// driver.
func newZstd() (*zstd.Encoder, *zstd.Decoder, error) { return record.NewCodec() }
