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
// keep one version; FullHistory repeats it with versions kept on every save
// until the default 24 are there.
//
// Go heap: HeapProfiles records are created and released, then loaded and
// held at once; the heap in use (runtime.ReadMemStats HeapAlloc after a GC)
// before and after the loads, divided by their number.
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
	// FullHistory is the same with a full history (DefaultHistory versions).
	FullHistoryVersions        float64 `json:"full_history_versions"`
	RedisBytesPerRecordFullHis float64 `json:"redis_bytes_per_record_full_history"`
	// GoHeapPerProfile is the heap one resident profile holds, in bytes.
	GoHeapPerProfile float64 `json:"go_heap_per_profile"`
	HeapProfiles     int     `json:"heap_profiles"`
}

// fullHistoryRecords bounds the records of the full-history figure.
const fullHistoryRecords = 20

// runMemory fills Result.Memory.
func (r *runner) runMemory(ctx context.Context) error {
	ns := r.ns("memory")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	rdb := r.client(0)
	defer func() { _ = rdb.Close() }()
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "bench-" + randomID(), Redis: rdb, Namespace: ns, Logger: r.log})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = node.Close(cctx)
	}()
	onMessage := func(d *profileData, _ datadriver.Message) error { d.Level++; return nil }
	drv, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName, OnMessage: onMessage})
	if err != nil {
		return err
	}
	full, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName + "Hist", OnMessage: onMessage,
		HistoryEvery: time.Millisecond})
	if err != nil {
		return err
	}
	m := &r.res.Memory
	m.Records, m.Saves, m.HeapProfiles = r.cfg.MemoryRecords, r.cfg.MemorySaves, r.cfg.HeapProfiles
	rng := rand.NewChaCha8([32]byte{5})
	size := r.cfg.MemoryDataBytes

	fill := func(d *datadriver.Driver[profileData], prefix string, records, saves int) (memSample, error) {
		var sum memSample
		for i := range records {
			s, err := r.fillRecord(ctx, d, ns, fmt.Sprintf("%s-%d", prefix, i), size, saves, rng)
			if err != nil {
				return sum, err
			}
			sum.add(s)
		}
		return sum.div(float64(records)), nil
	}
	s, err := fill(drv, "mem", r.cfg.MemoryRecords, r.cfg.MemorySaves)
	if err != nil {
		return err
	}
	m.DataBytes, m.HistoryVersions = int(s.data), round1(s.versions)
	if r.mem {
		m.RecordBytes, m.HistoryBytes, m.InboxBytes = round1(s.record), round1(s.history), round1(s.inbox)
		m.RedisBytesPerRecord = round1(s.total())
		f, err := fill(full, "full", min(r.cfg.MemoryRecords, fullHistoryRecords), datadriver.DefaultHistory+2)
		if err != nil {
			return err
		}
		m.RedisBytesPerRecordFullHis, m.FullHistoryVersions = round1(f.total()), round1(f.versions)
	}

	if m.GoHeapPerProfile, err = heapPerProfile(ctx, drv, r.cfg.HeapProfiles, size, rng); err != nil {
		return err
	}
	r.progress("  Redis %.0f bytes per record of %d bytes (record %.0f, history %.0f with %.1f versions, inbox %.0f); %.0f with %.0f versions; Go heap %.0f bytes per resident profile",
		m.RedisBytesPerRecord, m.DataBytes, m.RecordBytes, m.HistoryBytes, m.HistoryVersions, m.InboxBytes,
		m.RedisBytesPerRecordFullHis, m.FullHistoryVersions, m.GoHeapPerProfile)
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

// fillRecord loads key, saves it saves times with fresh data, sends it one
// message and waits until it is applied, releases it, and returns the
// MEMORY USAGE of its record, history and inbox, and its history versions.
// A kept version needs at least a millisecond between two writes, so the
// saves are a millisecond apart.
func (r *runner) fillRecord(ctx context.Context, drv *datadriver.Driver[profileData], ns, key string, size, saves int,
	rng *rand.ChaCha8) (memSample, error) {
	var out memSample
	p, err := drv.Load(ctx, key, datadriver.LoadOptions{})
	if err != nil {
		return out, err
	}
	for range saves {
		blob := newBlob(size, rng)
		if err := p.Update(func(d *profileData) { d.Blob = blob; d.Coins++ }); err != nil {
			return out, err
		}
		if err := p.Save(ctx); err != nil {
			return out, err
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return out, err
		}
	}
	if _, err := drv.Send(ctx, key, map[string]int{"gems": 5}); err != nil {
		return out, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for applied := false; !applied; {
		p.View(func(d *profileData) { applied = d.Level > 0 })
		if !applied && time.Now().After(deadline) {
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
	fields, err := r.admin.HLen(ctx, record.HistoryKey(rk)).Result()
	if err != nil {
		return out, err
	}
	out.data, out.versions = float64(data), float64(fields/2) // d<ver> and t<ver> per version
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

// heapPerProfile creates n records, then loads and holds them all, and
// returns the heap the loads added per profile.
func heapPerProfile(ctx context.Context, drv *datadriver.Driver[profileData], n, size int, rng *rand.ChaCha8) (float64, error) {
	key := func(i int) string { return fmt.Sprintf("heap-%d", i) }
	for i := range n {
		p, err := drv.Load(ctx, key(i), datadriver.LoadOptions{})
		if err != nil {
			return 0, err
		}
		blob := newBlob(size, rng)
		if err := p.Update(func(d *profileData) { d.Blob = blob }); err != nil {
			return 0, err
		}
		if err := p.Release(ctx); err != nil {
			return 0, err
		}
	}
	held := make([]*datadriver.Profile[profileData], n)
	before := heapInUse()
	for i := range held {
		p, err := drv.Load(ctx, key(i), datadriver.LoadOptions{})
		if err != nil {
			return 0, err
		}
		held[i] = p
	}
	after := heapInUse()
	var errs []error
	for _, p := range held {
		errs = append(errs, p.Release(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return round1(float64(int64(after)-int64(before)) / float64(n)), nil
}

// heapInUse is HeapAlloc after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
