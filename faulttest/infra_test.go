//go:build linux

package faulttest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	internalrecord "github.com/ckernel/playerdata/internal/record"
	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"
)

// record is a profile record as read straight from Redis.
type record struct {
	Job, Token string
	LockAt     int64 // ms, Redis clock
	Epoch, Ver int64
	Data       Player
	HasData    bool
}

// readRecords reads the records of keys in one pipeline.
func readRecords(ctx context.Context, rdb redis.UniversalClient, ns string, keys []string) (map[string]record, error) {
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, internalrecord.Key(ns, driverName, k),
				"lock.job", "lock.token", "lock.at", "epoch", "ver", "data")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	out := make(map[string]record, len(keys))
	for i, k := range keys {
		f := cmds[i].Val()
		r := record{Job: asStr(f[0]), Token: asStr(f[1]), LockAt: asInt(f[2]), Epoch: asInt(f[3]), Ver: asInt(f[4])}
		if d := asStr(f[5]); d != "" {
			if err := msgpack.Unmarshal([]byte(d), &r.Data); err != nil {
				return nil, fmt.Errorf("record %s: decode data: %w", k, err)
			}
			r.HasData = true
		}
		out[k] = r
	}
	return out, nil
}

func asStr(v any) string {
	s, _ := v.(string)
	return s
}

func asInt(v any) int64 {
	n, _ := strconv.ParseInt(asStr(v), 10, 64)
	return n
}

// mustRecords is readRecords that fails the test on error.
func (c *cluster) mustRecords(rdb redis.UniversalClient, keys []string) map[string]record {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := readRecords(ctx, rdb, c.ns, keys)
	if err != nil {
		c.t.Fatal(err)
	}
	return recs
}

// presenceExpiry reads job's field of the presence hash: the Redis time (ms)
// its last beat expires; 0 when absent.
func (c *cluster) presenceExpiry(job string) int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.rdb.HGet(ctx, presencecore.KeyFor(c.ns), job).Result()
	if err != nil && err != redis.Nil {
		c.t.Fatalf("read presence of %s: %v", job, err)
	}
	ms, _ := strconv.ParseInt(v, 10, 64)
	return ms
}

// recordWatch samples records while a scenario runs and collects every
// sign that a write it must never see landed: the data's coins going
// backwards, data written by another server after owner's first write, or
// the lock leaving owner.
type recordWatch struct {
	stop func()
	mu   sync.Mutex
	bad  []string
	n    int // samples taken
}

// watchRecords starts sampling keys (owned by owner) every 20 ms until the
// returned watch is stopped (or the test ends).
func (c *cluster) watchRecords(keys []string, owner string) *recordWatch {
	w := &recordWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.stop = func() { cancel(); <-done }
	c.t.Cleanup(w.stop)
	go func() {
		defer close(done)
		prev := make(map[string]record, len(keys))
		ownerWrote := make(map[string]bool, len(keys))
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			recs, err := readRecords(ctx, c.rdb, c.ns, keys)
			if err == nil {
				w.check(recs, prev, ownerWrote, owner)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *recordWatch) check(recs, prev map[string]record, ownerWrote map[string]bool, owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	add := func(format string, a ...any) {
		if len(w.bad) < 20 {
			w.bad = append(w.bad, fmt.Sprintf(format, a...))
		}
	}
	for k, r := range recs {
		p, seen := prev[k]
		switch {
		case r.Job != owner:
			add("%s: lock held by %q, not %s", k, r.Job, owner)
		case seen && r.Data.Coins < p.Data.Coins:
			add("%s: coins went back from %d to %d (written by %s, epoch %d)", k, p.Data.Coins, r.Data.Coins, r.Data.Writer, r.Data.Epoch)
		case ownerWrote[k] && r.Data.Writer != owner:
			add("%s: data written by %s (epoch %d) after %s had written it", k, r.Data.Writer, r.Data.Epoch, owner)
		}
		if r.Data.Writer == owner {
			ownerWrote[k] = true
		}
		prev[k] = r
	}
}

// result stops the watch and returns its findings.
func (w *recordWatch) result() (samples int, bad []string) {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, append([]string(nil), w.bad...)
}
