package presencecore_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/testsupport"
)

// syncBuffer is a log sink safe for the loop's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newPresence builds a Presence closed at the end of the test.
func newPresence(tb testing.TB, rdb redis.UniversalClient, cfg presencecore.Config) *presencecore.Presence {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p, err := presencecore.New(rdb, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// waitFor polls cond (Redis and the loop run in real time) until it holds.
func waitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLoopAfterRestartOrFailover: when Redis comes back with its data (a
// restart with persistence) or a replica takes over, the presence hash is
// still there with the old run's meta and beats. Readers answer Unknown for
// a server that stopped beating (the run changed under the meta) rather
// than Stopped; the beat loop's fast path writes the new run into the meta
// on the first beat that meets NOSCRIPT or follows a failure; and one TTL
// later a missing beat is proof again.
func TestLoopAfterRestartOrFailover(t *testing.T) {
	timing := presencecore.Config{Beat: 100 * time.Millisecond, TTL: 600 * time.Millisecond}
	tests := []struct {
		name string
		// start gives the client the servers use and the fault to inject;
		// the fault returns once the new Redis answers.
		start func(t *testing.T) (rdb redis.UniversalClient, ns string, fault func(t *testing.T))
	}{
		{"restart that keeps the data", func(t *testing.T) (redis.UniversalClient, string, func(*testing.T)) {
			r := testsupport.StartOwnRedis(t)
			if r.Kind != testsupport.KindRedisServer {
				t.Skip("needs a redis-server (a run id, and data kept across a restart)")
			}
			return r.Client(t), r.Namespace, func(t *testing.T) { r.RestartKeepData(t) }
		}},
		{"failover to a replica", func(t *testing.T) (redis.UniversalClient, string, func(*testing.T)) {
			r := testsupport.StartRedisReplicated(t, 1)
			rdb := r.Client(t)
			return rdb, r.Namespace, func(t *testing.T) {
				key := presencecore.KeyFor(r.Namespace)
				waitFor(t, 5*time.Second, "the hash to reach the replica", func() bool {
					v, _ := r.Replica(0).Client(t).HGet(context.Background(), key, "\x00since").Result()
					return v == "0"
				})
				r.Failover(t)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			rdb, ns, fault := tt.start(t)
			key := presencecore.KeyFor(ns)
			cfg := func(job string, logs io.Writer) presencecore.Config {
				c := timing
				c.Key, c.JobID = key, job
				if logs != nil {
					c.Logger = slog.New(slog.NewTextHandler(logs, nil))
				}
				return c
			}
			crashed := newPresence(t, rdb, cfg("crashed", nil))
			if err := crashed.Beat(ctx); err != nil { // and never again
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			live := newPresence(t, rdb, cfg("live", logs))
			if err := live.Claim(ctx); err != nil {
				t.Fatal(err)
			}
			live.Start()
			reader := newPresence(t, rdb, cfg("reader", nil))
			if err := rdb.HSet(ctx, key, "\x00since", "0").Err(); err != nil { // the run is old: proof at once
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "crashed to read stopped", func() bool {
				return reader.Read(ctx, "crashed").Status == presencecore.Stopped
			})

			fault(t)

			waitFor(t, 10*time.Second, "a read under the new Redis", func() bool {
				return reader.Read(ctx, "crashed").Err == nil
			})
			if got := reader.Read(ctx, "crashed"); got.Status != presencecore.Unknown {
				t.Fatalf("right after the new run: Read(crashed) = %+v, want unknown", got)
			}
			const newRun = "new Redis run detected"
			waitFor(t, 10*time.Second, "the loop to write the new run", func() bool {
				return strings.Contains(logs.String(), newRun)
			})
			reset := time.Now()
			if got := reader.Read(ctx, "crashed"); got.Status != presencecore.Unknown {
				t.Fatalf("after the meta reset: Read(crashed) = %+v, want unknown for one TTL", got)
			}
			waitFor(t, 10*time.Second, "crashed to read stopped one TTL into the new run", func() bool {
				return reader.Read(ctx, "crashed").Status == presencecore.Stopped
			})
			if d := time.Since(reset); d < timing.TTL-50*time.Millisecond {
				t.Errorf("stopped %v after the meta reset, want one TTL (%v)", d, timing.TTL)
			}
			if got := reader.Read(ctx, "live"); got.Status != presencecore.Alive {
				t.Errorf("the beating server reads %+v", got)
			}
		})
	}
}

// TestShardsOnRedisCluster: with 16 shards on a three-master Redis Cluster,
// every shard and its owners hash share a slot, the shards spread over the
// masters, and reads, List and Claim work through a cluster client.
func TestShardsOnRedisCluster(t *testing.T) {
	c := testsupport.StartRedisCluster(t)
	rdb := c.Client(t)
	ctx := context.Background()
	key := presencecore.KeyFor(c.Namespace)
	const shards, servers = 16, 48
	perMaster := make(map[string]int)
	for n := range shards {
		k := presencecore.ShardKey(key, n)
		if testsupport.KeySlot(k) != testsupport.KeySlot(presencecore.OwnersKey(k)) {
			t.Errorf("shard %s and its owners hash %s are in different slots", k, presencecore.OwnersKey(k))
		}
		if testsupport.KeySlot(k) != testsupport.KeySlot(presencecore.LoadKey(k)) {
			t.Errorf("shard %s and its load hash %s are in different slots", k, presencecore.LoadKey(k))
		}
		perMaster[c.MasterOf(k)]++
	}
	t.Logf("shards per master: %v", perMaster)
	if len(perMaster) != 3 {
		t.Errorf("16 shards on %d of 3 masters", len(perMaster))
	}

	var jobs []string
	for i := range servers {
		job := "server-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		jobs = append(jobs, job)
		p := newPresence(t, rdb, presencecore.Config{Key: key, JobID: job, Shards: shards, Sessions: func() int { return i }})
		if err := p.Claim(ctx); err != nil {
			t.Fatalf("Claim(%s): %v", job, err)
		}
	}
	reader := newPresence(t, rdb, presencecore.Config{Key: key, JobID: "reader", Shards: shards})
	for _, job := range jobs {
		if got := reader.Read(ctx, job); got.Status != presencecore.Alive {
			t.Errorf("Read(%s) = %+v", job, got)
		}
	}
	list, err := reader.List(ctx)
	if err != nil || len(list) != servers {
		t.Fatalf("List: %d entries, %v", len(list), err)
	}
	// Each shard's load hash answers in the shard's own slot: every count
	// is read, least loaded first.
	loads, err := reader.Loads(ctx)
	if err != nil || len(loads) != servers {
		t.Fatalf("Loads: %d entries, %v", len(loads), err)
	}
	for i, l := range loads {
		if l.Sessions != i || l.JobID != jobs[i] {
			t.Errorf("Loads[%d] = %+v, want %s with %d sessions", i, l, jobs[i], i)
		}
	}
	again := newPresence(t, rdb, presencecore.Config{Key: key, JobID: jobs[0], Shards: shards, Beat: 100 * time.Millisecond, TTL: 300 * time.Millisecond})
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := again.Claim(cctx); err == nil {
		t.Errorf("a second Claim of %s succeeded while its beat lives", jobs[0])
	}
}
