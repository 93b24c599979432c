package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

// HistoryCost is what kept versions cost, with a realistic profile
// (gameProfile: msgpack of about MemoryDataBytes), a version kept by every
// save (HistoryEvery 1 ms, saves a millisecond apart: an hour of play each)
// and each save changing ChangePct of the profile's Values. Every figure
// stands beside the whole-copy layout measured in the same run: the same
// versions, each stored whole.
type HistoryCost struct {
	DataBytes int `json:"data_bytes"`
	Values    int `json:"values"`
	Records   int `json:"records"` // records per layout
	// Layouts are Redis bytes per record for 1, 8 and 24 kept versions at
	// 5, 10 and 50 % of the values changed per version.
	Layouts []HistoryLayout `json:"layouts"`
	// Save is what a save that keeps a version costs, at 24 kept versions
	// and 5 % changed.
	Save HistorySave `json:"save"`
	// ReadOldest is Driver.ReadVersion of the oldest of 24 kept versions
	// (5 % changed), from the call to its return.
	ReadOldest Latency `json:"read_oldest"`
}

// HistoryLayout is one history's Redis memory, per record.
type HistoryLayout struct {
	ChangePct int     `json:"change_pct"`
	DataBytes float64 `json:"data_bytes"`     // the current data (mean)
	Versions  float64 `json:"versions"`       // kept (mean)
	Whole     float64 `json:"whole_versions"` // of them stored whole
	// RedisBytesPerRecord is MEMORY USAGE (SAMPLES 0) of the record, its
	// history and its inbox; HistoryBytes the history's; Times the total ÷
	// the data. Encoding is the history hash's (listpack or hashtable).
	RedisBytesPerRecord float64 `json:"redis_bytes_per_record"`
	HistoryBytes        float64 `json:"history_bytes"`
	Times               float64 `json:"times_data"`
	Encoding            string  `json:"encoding"`
	// WholeCopy is the same with the same versions stored whole, their
	// metadata as text (d<ver>, t<ver>: the layout before deltas).
	WholeCopyBytesPerRecord float64 `json:"whole_copy_bytes_per_record"`
	WholeCopyTimes          float64 `json:"whole_copy_times_data"`
}

// HistorySave is what one save that keeps a version costs, on records that
// keep 24; the Whole figures are the same saves in the whole-copy layout:
// on records whose 24 versions are whole copies with text metadata (as
// builds before deltas kept them), each save keeping the new version whole
// and rewriting none.
type HistorySave struct {
	Calls  int `json:"calls"`  // saves per round
	Rounds int `json:"rounds"` // the figures are the medians of the rounds
	// RedisUS is the server's time per save (INFO commandstats usec of the
	// script and of the history read before it); RedisCPUUS its CPU (INFO
	// cpu, which adds reading the calls and writing the answers).
	RedisUS         float64 `json:"redis_us"`
	WholeRedisUS    float64 `json:"whole_redis_us"`
	RedisCPUUS      float64 `json:"redis_cpu_us"`
	WholeRedisCPUUS float64 `json:"whole_redis_cpu_us"`
	// GoUS is this side's work per save: compress the version, decode the
	// history read, plan the rewrite (decompress the previous version, make
	// the delta); WholeGoUS only compresses the version.
	GoUS      float64 `json:"go_us"`
	WholeGoUS float64 `json:"whole_go_us"`
}

// The history figures' grid, and the layout the other figures use.
var (
	historyChanges  = []int{5, 10, 50}
	historyVersions = []int{1, 8, defaults.History}
)

// historyRecords bounds the records of each layout.
const historyRecords = 10

// historyReads is how many ReadVersion calls are timed.
const historyReads = 500

// historySaveRounds is how many rounds of saves the save cost takes the
// median of.
const historySaveRounds = 5

// runHistory fills m.History and m's full-history figures.
func (r *runner) runHistory(ctx context.Context, node *datadriver.Node, rdb *redis.Client, ns string, m *Memory) error {
	h := &m.History
	h.Records = min(r.cfg.MemoryRecords, historyRecords)
	rng := rand.New(rand.NewPCG(11, 11))
	h.Values = newGameProfile(r.cfg.MemoryDataBytes, rng).values()
	for _, pct := range historyChanges {
		for _, n := range historyVersions {
			l, keys, drv, err := r.historyLayout(ctx, node, ns, pct, n, h.Records)
			if err != nil {
				return fmt.Errorf("%d versions, %d %%: %w", n, pct, err)
			}
			h.Layouts = append(h.Layouts, l)
			if pct != historyChanges[0] || n != defaults.History {
				continue
			}
			m.FullHistoryVersions, m.RedisBytesPerRecordFullHis = l.Versions, l.RedisBytesPerRecord
			if h.ReadOldest, err = readOldest(ctx, drv, keys, historyReads/len(keys)); err != nil {
				return err
			}
		}
	}
	h.DataBytes = int(h.Layouts[0].DataBytes)
	var err error
	h.Save, err = r.historySave(ctx, rdb, ns)
	return err
}

// historyLayout fills records of a driver keeping n versions, each save
// changing pct % of the values, and measures them.
func (r *runner) historyLayout(ctx context.Context, node *datadriver.Node, ns string, pct, n, records int) (
	HistoryLayout, []string, *datadriver.Driver[gameProfile], error) {
	l := HistoryLayout{ChangePct: pct}
	drv, err := datadriver.NewDriver(node, datadriver.Config[gameProfile]{Name: fmt.Sprintf("Hist%dv%dpct", n, pct),
		History: n, HistoryEvery: time.Millisecond,
		OnMessage: func(d *gameProfile, _ datadriver.Message) error { d.Messages++; return nil }})
	if err != nil {
		return l, nil, nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(pct), uint64(n)))
	var sum memSample
	var whole, wholeCopy float64
	keys := make([]string, records)
	for i := range keys {
		keys[i] = "hist-" + strconv.Itoa(i)
		base := newGameProfile(r.cfg.MemoryDataBytes, rng)
		update := func(d *gameProfile, save int) {
			if save == 0 {
				*d = *base.clone()
			} else {
				d.change(float64(pct)/100, rng)
			}
		}
		s, err := fillRecord(ctx, r, drv, ns, keys[i], n+2, update, func(d *gameProfile) bool { return d.Messages > 0 })
		if err != nil {
			return l, nil, nil, err
		}
		sum.add(s)
		rk := record.Key(ns, drv.Name(), keys[i])
		res, err := record.Versions(ctx, r.admin, rk)
		if err != nil {
			return l, nil, nil, err
		}
		hist := res.History
		for _, v := range hist.Versions {
			if v.Form != record.FormDelta {
				whole++
			}
		}
		if r.mem {
			b, err := r.wholeCopyBytes(ctx, rk, hist)
			if err != nil {
				return l, nil, nil, err
			}
			wholeCopy += b
		}
		if i == 0 && r.mem {
			l.Encoding, _ = r.admin.ObjectEncoding(ctx, record.HistoryKey(rk)).Result()
		}
	}
	s := sum.div(float64(records))
	l.DataBytes, l.Versions, l.Whole = round1(s.data), round1(s.versions), round1(whole/float64(records))
	if r.mem && s.data > 0 {
		l.RedisBytesPerRecord, l.HistoryBytes = round1(s.total()), round1(s.history)
		l.WholeCopyBytesPerRecord = round1(s.record + s.inbox + wholeCopy/float64(records))
		l.Times, l.WholeCopyTimes = round1(s.total()/s.data), round1(l.WholeCopyBytesPerRecord/s.data)
	}
	return l, keys, drv, nil
}

// wholeCopyBytes is the MEMORY USAGE of hist's versions stored whole with
// their metadata as text (the layout before deltas), in a scratch hash.
func (r *runner) wholeCopyBytes(ctx context.Context, rk string, hist record.History) (float64, error) {
	enc, dec, err := record.NewCodec()
	if err != nil {
		return 0, err
	}
	defer func() { _ = enc.Close(); dec.Close() }()
	scratch := rk + ":wholecopy"
	var fields []any
	for _, v := range hist.Versions {
		data, err := hist.Read(ctx, r.admin, rk, v.Ver, dec)
		if err != nil {
			return 0, fmt.Errorf("version %d: %w", v.Ver, err)
		}
		fields = append(fields, record.HistDataField(v.Ver), record.AppendWholeText(nil, enc, data),
			record.HistMetaField(v.Ver), fmt.Sprintf("%d,%d,%d", v.At.UnixMilli(), v.Schema, v.SchemaMin))
	}
	if len(fields) == 0 {
		return 0, nil
	}
	defer func() { _ = r.admin.Del(context.WithoutCancel(ctx), scratch).Err() }()
	if err := r.admin.HSet(ctx, scratch, fields...).Err(); err != nil {
		return 0, err
	}
	n, err := r.admin.MemoryUsage(ctx, scratch, 0).Result()
	return float64(n), err
}

// readOldest times Driver.ReadVersion of the oldest kept version of each
// key, reads times each.
func readOldest(ctx context.Context, drv *datadriver.Driver[gameProfile], keys []string, reads int) (Latency, error) {
	var samples []float64
	for _, key := range keys {
		vs, err := drv.Versions(ctx, key)
		if err != nil {
			return Latency{}, err
		}
		oldest := vs[len(vs)-1]
		for range max(reads, 1) {
			start := time.Now()
			if _, err := drv.ReadVersion(ctx, key, oldest.At); err != nil {
				return Latency{}, fmt.Errorf("ReadVersion of ver %d of %s: %w", oldest.Ver, key, err)
			}
			samples = append(samples, ms(time.Since(start)))
		}
	}
	return summarize(samples), nil
}

// keptRecord is one record the save-cost phase writes at the script level,
// as the driver does.
type keptRecord struct {
	key, token string
	ver        int64
	data       []byte
	at         time.Time // when data was written
	profile    *gameProfile
}

// keeper writes keptRecords: each write changes 5 % of the profile's
// values and encodes it as the driver does.
type keeper struct {
	rdb   *redis.Client
	enc   *zstd.Encoder
	dec   *zstd.Decoder
	codec *datacodec.Codec[gameProfile]
	rng   *rand.Rand
}

// historySave measures saves that keep a version, as the driver writes
// them and in the whole-copy layout, each on records of their own that keep
// 24 versions.
func (r *runner) historySave(ctx context.Context, rdb *redis.Client, ns string) (HistorySave, error) {
	s := HistorySave{Calls: max(r.cfg.ScriptCalls/10, 20), Rounds: historySaveRounds}
	enc, dec, err := record.NewCodec()
	if err != nil {
		return s, err
	}
	defer func() { _ = enc.Close(); dec.Close() }()
	codec, err := datacodec.New(gameProfile{}, datacodec.Options{})
	if err != nil {
		return s, err
	}
	layouts := [2]struct {
		k                *keeper
		recs             []keptRecord
		redis, cpu, goUS []float64 // per round
	}{}
	for l := range layouts { // 0: deltas, 1: whole copies
		k := &keeper{rdb: rdb, enc: enc, dec: dec, codec: codec, rng: rand.New(rand.NewPCG(5, 5))}
		recs := make([]keptRecord, s.Calls)
		for i := range recs {
			recs[i] = keptRecord{key: record.Key(ns, "HistSave"+strconv.Itoa(l), strconv.Itoa(i)),
				token: "tok-" + randomID(), profile: newGameProfile(r.cfg.MemoryDataBytes, k.rng)}
			if err := k.fill(ctx, &recs[i], l == 1); err != nil {
				return s, err
			}
		}
		layouts[l].k, layouts[l].recs = k, recs
	}
	// Rounds alternate the layouts, each one save per record; the medians
	// of the rounds are reported.
	for range historySaveRounds {
		for l := range layouts {
			lt := &layouts[l]
			before := r.snapIf(ctx)
			var goTime time.Duration
			for i := range lt.recs {
				t, err := lt.k.write(ctx, &lt.recs[i], true, l == 0)
				if err != nil {
					return s, err
				}
				goTime += t
			}
			d := r.snapIf(ctx).since(before)
			n := float64(s.Calls)
			lt.redis = append(lt.redis, float64(d.scriptCalls().Usec+d.cmds["hgetall"].Usec+d.cmds["hget"].Usec)/n)
			lt.cpu = append(lt.cpu, d.cpuUS/n)
			lt.goUS = append(lt.goUS, float64(goTime.Microseconds())/n)
		}
	}
	s.RedisUS, s.RedisCPUUS, s.GoUS = round3(median(layouts[0].redis)), round3(median(layouts[0].cpu)), round3(median(layouts[0].goUS))
	s.WholeRedisUS, s.WholeRedisCPUUS, s.WholeGoUS = round3(median(layouts[1].redis)), round3(median(layouts[1].cpu)),
		round3(median(layouts[1].goUS))
	return s, nil
}

// fill takes rec's lock and writes it DefaultHistory+1 times, each write
// keeping the data it replaces: as the driver does, or whole with text
// metadata, written beside the writes as builds before deltas kept them
// (whole).
func (k *keeper) fill(ctx context.Context, rec *keptRecord, whole bool) error {
	res, err := record.Acquire(ctx, k.rdb, rec.key, record.AcquireArgs{Job: "bench", Token: rec.token, MaxAge: time.Hour,
		Format: record.Format})
	if err == nil && res.Outcome != record.Acquired {
		err = fmt.Errorf("acquire %s: %v", rec.key, res.Outcome)
	}
	if err != nil {
		return err
	}
	for i := range defaults.History + 1 {
		ver, data := rec.ver, rec.data
		if _, err := k.write(ctx, rec, !whole, !whole); err != nil {
			return err
		}
		if whole && i > 0 {
			if err := k.rdb.HSet(ctx, record.HistoryKey(rec.key), record.HistDataField(ver), record.AppendWholeText(nil, k.enc, data),
				record.HistMetaField(ver), fmt.Sprintf("%d,0,0", time.Now().UnixMilli())).Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// write writes rec's profile, changed, keeping the data it replaces when
// keep (with a plan made from a listing of the history when plan, as the
// driver does), and returns the time this side spent on the history (not
// the listing's round trip): compress the version, decode the previous
// newest and make its delta.
func (k *keeper) write(ctx context.Context, rec *keptRecord, keep, plan bool) (time.Duration, error) {
	if rec.data != nil {
		rec.profile.change(0.05, k.rng)
	}
	data, err := k.codec.Encode(rec.profile, nil)
	if err != nil {
		return 0, err
	}
	a := record.SaveArgs{Mode: record.ModeSave, Token: rec.token, Data: data, History: defaults.History,
		HistoryEvery: time.Hour}
	var spent time.Duration
	if keep && rec.data != nil {
		h := &record.History{}
		if plan {
			if *h, _, err = record.ListForKeep(ctx, k.rdb, rec.key); err != nil {
				return 0, err
			}
		}
		start := time.Now()
		a.KeepMeta = record.KeptMeta{At: rec.at}
		a.Keep = record.NewKeptWhole(rec.ver, h.Newest(rec.ver), a.KeepMeta, rec.data, k.enc)
		a.KeepVer, a.KeepAlways = rec.ver, true
		if plan {
			p := h.Plan(record.KeepSpec{Ver: rec.ver, Data: rec.data, Value: a.Keep, Count: defaults.History,
				Budget: defaults.HistoryBytesPerData * defaults.MaxDataBytes, MaxChain: record.HistChain}, k.dec)
			a.KeepPlan = &p
		}
		spent += time.Since(start)
	}
	res, err := record.Save(ctx, k.rdb, rec.key, a)
	if err == nil && (res.Outcome != record.Written || res.VersionSkipped) {
		err = fmt.Errorf("save: not written as planned: %+v", res)
	}
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", rec.key, err)
	}
	rec.ver, rec.data, rec.at = res.Ver, data, res.At
	return spent, nil
}

// writeText prints the history figures.
func (h HistoryCost) writeText(ew *errWriter, mem, st measured) {
	ew.printf("\nHistory (%d bytes of msgpack, %d values; a version kept per save, each changing a share of the values; %d records each):\n",
		h.DataBytes, h.Values, h.Records)
	ew.printf("  %-8s %-9s %-22s %-22s %s\n", "changed", "versions", "deltas: bytes/record", "whole copies", "stored whole, history hash")
	for _, l := range h.Layouts {
		if !mem.ok {
			ew.printf("  %6d %%  %8.0f  %s\n", l.ChangePct, l.Versions, mem.na())
			continue
		}
		ew.printf("  %6d %%  %8.0f  %8.0f = %4.1f× data  %8.0f = %4.1f× data  %.0f, %s\n", l.ChangePct, l.Versions,
			l.RedisBytesPerRecord, l.Times, l.WholeCopyBytesPerRecord, l.WholeCopyTimes, l.Whole, orUnknown(l.Encoding))
	}
	s := h.Save
	ew.printf("  a save keeping a version (24 kept, 5 %%, %d saves): Redis %s µs (whole copies %s), Redis CPU %s µs (%s), Go %.1f µs (%.1f)\n",
		s.Calls, st.f("%.1f", s.RedisUS), st.f("%.1f", s.WholeRedisUS), st.f("%.1f", s.RedisCPUUS), st.f("%.1f", s.WholeRedisCPUUS),
		s.GoUS, s.WholeGoUS)
	r := h.ReadOldest
	ew.printf("  ReadVersion of the oldest of 24: p50 %.3f ms, p99 %.3f, max %.3f (%d reads)\n", r.P50MS, r.P99MS, r.MaxMS, r.N)
}
