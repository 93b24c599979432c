package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// Memory is what a profile costs in Redis and in the game server's heap.
//
// Redis: MemoryRecords records, each loaded, saved MemorySaves times with
// fresh data of MemoryDataBytes (random bytes: they do not compress), sent
// one message (applied and removed by the release), then released; then
// MEMORY USAGE (SAMPLES 0) of the record hash, its history hash and its
// inbox stream. With the default history (one version an hour) those saves
// keep one version. History (history.go) measures kept versions with a
// realistic profile; the full-history figures are its default layout (24
// versions, 5 % of the values changed by each).
//
// Go heap: HeapProfiles records are created and released, then loaded and
// held at once, then each changed and saved; the heap in use
// (runtime.ReadMemStats HeapAlloc after a GC) before the loads, after them
// and after the saves, each read at rest, divided by their number
// (heapPerProfile).
type Memory struct {
	Records   int `json:"records"`
	Saves     int `json:"saves"`
	DataBytes int `json:"data_bytes"` // the encoded profile
	// RedisBytesPerRecord is the mean of record + history + inbox.
	RedisBytesPerRecord float64 `json:"redis_bytes_per_record"`
	RecordBytes         float64 `json:"record_bytes"`
	HistoryBytes        float64 `json:"history_bytes"`
	InboxBytes          float64 `json:"inbox_bytes"`
	HistoryVersions     float64 `json:"history_versions"`
	// FullHistory is the same with a full history (DefaultHistory versions
	// of the realistic profile).
	FullHistoryVersions        float64 `json:"full_history_versions"`
	RedisBytesPerRecordFullHis float64 `json:"redis_bytes_per_record_full_history"`
	// GoHeapPerProfile is the heap one resident profile holds, in bytes,
	// once its executor has written (as a server holds it after a save or
	// an autosave); GoHeapPerProfileLoaded right after its load. Both at
	// rest: no call in flight, every call's deadline ended.
	GoHeapPerProfile       float64 `json:"go_heap_per_profile"`
	GoHeapPerProfileLoaded float64 `json:"go_heap_per_profile_loaded"`
	// GoObjectsPerProfile is the heap objects one resident profile holds
	// (GoObjectsPerProfileLoaded after its load), GoroutinesPerProfile the
	// goroutines (issue 35: none of its own).
	GoObjectsPerProfile       float64 `json:"go_objects_per_profile"`
	GoObjectsPerProfileLoaded float64 `json:"go_objects_per_profile_loaded"`
	GoroutinesPerProfile      float64 `json:"goroutines_per_profile"`
	HeapProfiles              int     `json:"heap_profiles"`
	// BareHeapPerValue is the heap the same decoded value takes held in a
	// plain map under the same key, without the library: the floor of a
	// resident profile (what a game holding its players' data pays anyway).
	BareHeapPerValue float64 `json:"bare_heap_per_value,omitempty"`
	// History is what kept versions cost, by layout, beside whole copies.
	History HistoryCost `json:"history"`
}

// runMemory fills Result.Memory.
func (r *runner) runMemory(ctx context.Context) error {
	node, rdb, ns, end, err := r.phaseNode(ctx, "memory", 0)
	if err != nil {
		return err
	}
	defer end()
	onMessage := func(d *profileData, _ datadriver.Message) error { d.Level++; return nil }
	drv, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName, OnMessage: onMessage})
	if err != nil {
		return err
	}
	m := &r.res.Memory
	m.Records, m.Saves, m.HeapProfiles = r.cfg.MemoryRecords, r.cfg.MemorySaves, r.cfg.HeapProfiles
	rng := rand.NewChaCha8([32]byte{5})
	size := r.cfg.MemoryDataBytes

	var sum memSample
	for i := range r.cfg.MemoryRecords {
		update := func(d *profileData, _ int) { d.Blob = newBlob(size, rng); d.Coins++ }
		s, err := fillRecord(ctx, r, drv, ns, fmt.Sprintf("mem-%d", i), r.cfg.MemorySaves, update,
			func(d *profileData) bool { return d.Level > 0 })
		if err != nil {
			return err
		}
		sum.add(s)
	}
	s := sum.div(float64(r.cfg.MemoryRecords))
	m.DataBytes, m.HistoryVersions = int(s.data), round1(s.versions)
	if r.mem {
		m.RecordBytes, m.HistoryBytes, m.InboxBytes = round1(s.record), round1(s.history), round1(s.inbox)
		m.RedisBytesPerRecord = round1(s.total())
	}
	if err := r.runHistory(ctx, node, rdb, ns, m); err != nil {
		return fmt.Errorf("history: %w", err)
	}

	hf, err := r.heapPerProfile(ctx, r.cfg.HeapProfiles, size, rng)
	if err != nil {
		return err
	}
	m.GoHeapPerProfile, m.GoObjectsPerProfile, m.GoroutinesPerProfile = hf.bytes, hf.objects, hf.goroutines
	m.GoHeapPerProfileLoaded, m.GoObjectsPerProfileLoaded = hf.loadedBytes, hf.loadedObjects
	m.BareHeapPerValue = hf.bare
	r.progress("  Redis %.0f bytes per record of %d bytes (record %.0f, history %.0f with %.1f versions, inbox %.0f); %.0f with %.0f versions; "+
		"a resident profile: Go heap %.0f bytes, %.1f objects, %.2f goroutines",
		m.RedisBytesPerRecord, m.DataBytes, m.RecordBytes, m.HistoryBytes, m.HistoryVersions, m.InboxBytes,
		m.RedisBytesPerRecordFullHis, m.FullHistoryVersions, m.GoHeapPerProfile, m.GoObjectsPerProfile, m.GoroutinesPerProfile)
	return nil
}

// memSample is what one record (or the mean of several) takes in Redis, in
// bytes, its history versions, and the size of its stored data.
type memSample struct {
	record, history, inbox, versions, data float64
}

func (s *memSample) add(o memSample) {
	s.record, s.history, s.inbox = s.record+o.record, s.history+o.history, s.inbox+o.inbox
	s.versions, s.data = s.versions+o.versions, s.data+o.data
}

func (s memSample) div(n float64) memSample {
	return memSample{s.record / n, s.history / n, s.inbox / n, s.versions / n, s.data / n}
}

func (s memSample) total() float64 { return s.record + s.history + s.inbox }

// fillRecord loads key, saves it saves times, each after update (which
// gets the save's number), sends it one message and waits until applied
// says it is, releases it, and returns the MEMORY USAGE of its record,
// history and inbox, and its history versions. A kept version needs at
// least a millisecond between two writes, so the saves are a millisecond
// apart.
func fillRecord[T any](ctx context.Context, r *runner, drv *datadriver.Driver[T], ns, key string, saves int,
	update func(d *T, save int), applied func(d *T) bool) (memSample, error) {
	var out memSample
	p, err := drv.Load(ctx, key, datadriver.LoadOptions{})
	if err != nil {
		return out, err
	}
	for i := range saves {
		if err := p.Update(func(d *T) { update(d, i) }); err != nil {
			return out, err
		}
		if err := p.Save(ctx); err != nil {
			return out, err
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return out, err
		}
	}
	if _, err := drv.Send(ctx, key, map[string]int{"gems": 5}, datadriver.SendOptions{}); err != nil {
		return out, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for done := false; !done; {
		p.View(func(d *T) { done = applied(d) })
		if !done && time.Now().After(deadline) {
			return out, errors.New("the message was not applied within 5 s")
		}
		if err := sleep(ctx, 100*time.Microsecond); err != nil {
			return out, err
		}
	}
	if err := p.Release(ctx); err != nil {
		return out, err
	}
	rk := record.Key(ns, drv.Name(), key)
	data, err := r.admin.HStrLen(ctx, rk, record.FieldData).Result()
	if err != nil {
		return out, err
	}
	hist, err := record.Versions(ctx, r.admin, rk)
	if err != nil {
		return out, err
	}
	out.data, out.versions = float64(data), float64(len(hist.Kept))
	if !r.mem {
		return out, nil
	}
	for _, k := range []struct {
		key string
		to  *float64
	}{{rk, &out.record}, {record.HistoryKey(rk), &out.history}, {record.InboxKey(rk), &out.inbox}} {
		n, err := r.admin.MemoryUsage(ctx, k.key, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, fmt.Errorf("MEMORY USAGE %s: %w", k.key, err)
		}
		*k.to = float64(n)
	}
	return out, nil
}

// heapSaveTimeout is the SaveTimeout of the heap figure's Node: the
// calls' shared deadlines (contexts and timers made once per 1/1000 of it
// while calls run, and kept until it passes) end that long after the last
// call, and the heap is read at rest, after them.
const heapSaveTimeout = time.Second

// heapFigures are what one resident profile holds: heap bytes and objects
// once its executor has written (its steady state) and just after its
// load, and goroutines.
type heapFigures struct {
	bytes, objects, loadedBytes, loadedObjects, goroutines, bare float64
}

// heapPerProfile creates n records, then loads and holds them all under a
// Node and driver of their own (no history: its compressor is the
// driver's, about 1.6 MB made at the first versions kept, once per driver
// and concurrent writer, whatever the profiles; the autosave an hour
// away), changes and saves each (its executor writes, as an autosave
// would), and returns what the profiles added per profile: after the saves
// (a resident profile as a server holds it) and right after the loads.
// Each reading is at rest (atRest): what a driver holds only while calls
// are in flight, bounded by its Node's concurrency and not by its
// profiles (encoded data on its way, deadline contexts), is not counted.
// A first profile saves and is released before the count starts, and the
// Redis client's pool is grown, so that what the driver makes once and the
// pool's connections are not counted.
func (r *runner) heapPerProfile(ctx context.Context, n, size int, rng *rand.ChaCha8) (heapFigures, error) {
	node, rdb, _, end, err := r.phaseNode(ctx, "memory-heap", heapSaveTimeout)
	if err != nil {
		return heapFigures{}, err
	}
	defer end()
	drv, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName + "Heap", Autosave: time.Hour,
		History: -1})
	if err != nil {
		return heapFigures{}, err
	}
	key := func(i int) string { return fmt.Sprintf("heap-%d", i) }
	for i := range n {
		p, err := drv.Load(ctx, key(i), datadriver.LoadOptions{})
		if err != nil {
			return heapFigures{}, err
		}
		blob := newBlob(size, rng)
		if err := p.Update(func(d *profileData) { d.Blob = blob }); err != nil {
			return heapFigures{}, err
		}
		if err := p.Release(ctx); err != nil {
			return heapFigures{}, err
		}
	}
	// What the first save creates once per driver and the pool's
	// connections are made before the count starts.
	warm, err := drv.Load(ctx, key(-1), datadriver.LoadOptions{})
	if err != nil {
		return heapFigures{}, err
	}
	if err := saveAll(ctx, []*datadriver.Profile[profileData]{warm}); err != nil {
		return heapFigures{}, err
	}
	if err := warm.Release(ctx); err != nil {
		return heapFigures{}, err
	}
	if err := growPool(ctx, rdb, 64); err != nil {
		return heapFigures{}, err
	}
	held := make([]*datadriver.Profile[profileData], n)
	defer func() {
		for _, p := range held {
			if p != nil {
				_ = p.Release(context.WithoutCancel(ctx))
			}
		}
	}()
	before, err := atRest(ctx)
	if err != nil {
		return heapFigures{}, err
	}
	g0 := runtime.NumGoroutine()
	for i := range held {
		if held[i], err = drv.Load(ctx, key(i), datadriver.LoadOptions{}); err != nil {
			return heapFigures{}, err
		}
	}
	loaded, err := atRest(ctx)
	if err != nil {
		return heapFigures{}, err
	}
	if err := saveAll(ctx, held); err != nil {
		return heapFigures{}, err
	}
	after, err := atRest(ctx)
	if err != nil {
		return heapFigures{}, err
	}
	g1 := runtime.NumGoroutine()
	per := func(a, b uint64) float64 { return round1(float64(int64(a)-int64(b)) / float64(n)) }
	bare := bareHeap(n, size, key, rng)
	return heapFigures{bytes: per(after.bytes, before.bytes), objects: per(after.objects, before.objects),
		loadedBytes: per(loaded.bytes, before.bytes), loadedObjects: per(loaded.objects, before.objects),
		goroutines: round3(float64(g1-g0) / float64(n)), bare: bare}, nil
}

// atRest is the heap in use once the calls' shared deadlines made so far
// have ended (heapSaveTimeout after the last call, and a margin) and the
// heap has settled: read again every settleEvery until two readings in a
// row agree (within settleObjects objects and settleBytes bytes), at most
// settleReads times. What the run's earlier phases leave winding down (a
// closed Node's goroutines, connections, their finalizers) ends while the
// readings go on, not between a figure's two readings: a tiny run on a
// loaded machine once read fewer objects with its 100 profiles held than
// before it loaded them.
func atRest(ctx context.Context) (heapUse, error) {
	if err := sleep(ctx, heapSaveTimeout+heapSaveTimeout/4); err != nil {
		return heapUse{}, err
	}
	last := heapInUse()
	for range settleReads {
		if err := sleep(ctx, settleEvery); err != nil {
			return heapUse{}, err
		}
		now := heapInUse()
		if absDiff(now.objects, last.objects) <= settleObjects && absDiff(now.bytes, last.bytes) <= settleBytes {
			return now, nil
		}
		last = now
	}
	return last, nil
}

// How atRest waits for the heap to settle.
const (
	settleEvery   = 100 * time.Millisecond
	settleReads   = 30
	settleObjects = 16
	settleBytes   = 4 << 10
)

// absDiff is |a − b|.
func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// bareHeap is the heap one value of the same data takes, held without the
// library: n values as their decode makes them (a blob of the same size
// each), in a map under the same keys as the driver's, grown one by one as
// the driver's is. Measured while the profiles are held, so the heap's
// state is the same.
func bareHeap(n, size int, key func(int) string, rng *rand.ChaCha8) float64 {
	before := heapInUse()
	held := make(map[string]*profileData)
	for i := range n {
		held[key(i)] = &profileData{Coins: 1, Blob: newBlob(size, rng)}
	}
	after := heapInUse()
	runtime.KeepAlive(held)
	return round1(float64(int64(after.bytes)-int64(before.bytes)) / float64(n))
}

// saveAll changes each profile and saves it: its executor writes the
// change, as an autosave would.
func saveAll(ctx context.Context, held []*datadriver.Profile[profileData]) error {
	for _, p := range held {
		if err := p.Update(func(d *profileData) { d.Coins++ }); err != nil {
			return err
		}
		if err := p.Save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// growPool makes rdb's pool hold at least n connections, at most its
// PoolSize (that many held at once, each used, then all given back).
func growPool(ctx context.Context, rdb *redis.Client, n int) error {
	n = min(n, rdb.Options().PoolSize)
	conns := make([]*redis.Conn, 0, n)
	var errs []error
	for range n {
		c := rdb.Conn()
		conns = append(conns, c)
		errs = append(errs, c.Ping(ctx).Err())
	}
	for _, c := range conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// heapUse is the heap in use: bytes and objects.
type heapUse struct{ bytes, objects uint64 }

// heapInUse is HeapAlloc and HeapObjects after a full collection.
func heapInUse() heapUse {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapUse{ms.HeapAlloc, ms.HeapObjects}
}
