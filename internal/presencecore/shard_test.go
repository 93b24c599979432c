package presencecore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestShardKeys(t *testing.T) {
	tests := []struct {
		key    string
		n      int
		shard  string
		owners string
	}{
		{"mygame:CKPresence", 0, "mygame:CKPresence", "mygame:CKPresence:{mygame:CKPresence}:owners"},
		{"mygame:CKPresence", 1, "mygame:CKPresence:{1}", "mygame:CKPresence:{1}:owners"},
		{"mygame:CKPresence", 15, "mygame:CKPresence:{15}", "mygame:CKPresence:{15}:owners"},
		{"{mygame}:CKPresence", 0, "{mygame}:CKPresence", "{mygame}:CKPresence:owners"},
	}
	for _, tt := range tests {
		t.Run(tt.shard, func(t *testing.T) {
			if got := ShardKey(tt.key, tt.n); got != tt.shard {
				t.Errorf("ShardKey(%q, %d) = %q, want %q", tt.key, tt.n, got, tt.shard)
			}
			if got := OwnersKey(tt.shard); got != tt.owners {
				t.Errorf("OwnersKey(%q) = %q, want %q", tt.shard, got, tt.owners)
			}
		})
	}
}

// TestShardOf pins the hash: every server and reader of a deployment, of
// whatever build, must agree on a JobID's shard.
func TestShardOf(t *testing.T) {
	tests := []struct {
		job    string
		shards int
		want   int
	}{
		{"server-a", 0, 0},
		{"server-a", 1, 0},
		{"server-a", 16, 4},
		{"server-b", 16, 13},
		{"anon-0011223344556677", 16, 6},
		{"server-a", 1024, 740},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.job, tt.shards), func(t *testing.T) {
			if got := ShardOf(tt.job, tt.shards); got != tt.want {
				t.Errorf("ShardOf(%q, %d) = %d, want %d", tt.job, tt.shards, got, tt.want)
			}
		})
	}
	counts := make([]int, 16)
	for i := range 1600 {
		counts[ShardOf(fmt.Sprintf("server-%d", i), 16)]++
	}
	for n, c := range counts {
		if c < 60 || c > 140 {
			t.Errorf("shard %d has %d of 1600 JobIDs: %v", n, c, counts)
		}
	}
}

// TestShards: with several shards each server beats into its own shard,
// each shard keeps its own run meta, and reads, proofs and List work
// across them as with one.
func TestShards(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	for _, shards := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			rdb := r.client(t)
			key := testKey(t)
			// A TTL that outlives 24 beats, reads and a List on a loaded
			// machine: every server but the crashed one must read alive.
			cfg := Config{Beat: short.Beat, TTL: time.Second, Shards: shards}
			jobs := make([]string, 24)
			used := make(map[string]bool)
			var ps []*Presence
			for i := range jobs {
				jobs[i] = fmt.Sprintf("server-%d", i)
				p := server(t, rdb, key, jobs[i], cfg)
				mustBeat(t, p)
				ps = append(ps, p)
				used[p.KeyOf(jobs[i])] = true
			}
			reader := server(t, rdb, key, "reader", cfg)
			for _, job := range jobs {
				k := reader.KeyOf(job)
				if k != ShardKey(key, ShardOf(job, shards)) {
					t.Fatalf("KeyOf(%s) = %q", job, k)
				}
				for _, other := range reader.Keys() {
					if has := rdb.HExists(ctx, other, job).Val(); has != (other == k) {
						t.Errorf("%s in %s: %v (its shard is %s)", job, other, has, k)
					}
				}
				if got := reader.Read(ctx, job); got.Status != Alive {
					t.Errorf("Read(%s) = %+v, want alive", job, got)
				}
			}
			if len(reader.Keys()) != shards || (shards > 1 && len(used) < 2) {
				t.Fatalf("%d keys, %d used", len(reader.Keys()), len(used))
			}
			for k := range used {
				if rdb.HGet(ctx, k, MetaSince).Val() == "" {
					t.Errorf("shard %s has no run meta", k)
				}
			}

			list, err := reader.List(ctx)
			if err != nil || len(list) != len(jobs) {
				t.Fatalf("List = %d entries, %v; want %d", len(list), err, len(jobs))
			}
			for _, e := range list {
				if e.Status != Alive || e.Instance == "" || ShardKey(key, e.Shard) != reader.KeyOf(e.JobID) {
					t.Errorf("entry %+v", e)
				}
			}

			// A crash: one server stops beating; it reads stopped in its
			// shard once that shard's run is a TTL old.
			crashed := jobs[5]
			for k := range used {
				agePresenceRun(t, rdb, k)
			}
			eventually(t, 5*time.Second, crashed+" to read stopped", func() bool {
				for i, p := range ps {
					if jobs[i] != crashed {
						mustBeat(t, p)
					}
				}
				return reader.Read(ctx, crashed).Status == Stopped
			})
			if got := reader.Read(ctx, jobs[6]); got.Status != Alive {
				t.Errorf("a beating server reads %+v", got)
			}
		})
	}
}

// ageRun gives each key the run meta of this Redis run, one TTL old or
// more, so that a missing beat there is proof at once.
func ageRun(tb testing.TB, rdb redis.UniversalClient, keys ...string) {
	tb.Helper()
	ctx := context.Background()
	run := ""
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
				run = v
			}
		}
	}
	for _, k := range keys {
		if err := rdb.HSet(ctx, k, MetaRun, run, MetaSince, "0").Err(); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestShardMismatch: a reader whose shard count differs from the servers'
// answers Unknown with ErrShardMismatch, never Stopped, for a live server;
// a server at the other count logs the mismatch; List reports it.
func TestShardMismatch(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	tests := []struct {
		name            string
		writers, reader int
	}{
		{"servers at 4 shards, reader at 1", 4, 1},
		{"servers at 1 shard, reader at 4", 1, 4},
		{"servers at 4 shards, reader at 8", 4, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			key := testKey(t)
			var jobs []string
			for i := range 16 {
				job := fmt.Sprintf("server-%d", i)
				jobs = append(jobs, job)
				mustBeat(t, server(t, rdb, key, job, Config{Shards: tt.writers}))
			}
			reader := server(t, rdb, key, "reader", Config{Shards: tt.reader})
			ageRun(t, rdb, reader.Keys()...)
			mismatched := 0
			for _, job := range jobs {
				got := reader.Read(ctx, job)
				switch {
				case got.Status == Stopped:
					t.Errorf("Read(%s) = stopped: a live server taken for dead", job)
				case got.Status == Unknown:
					if !errors.Is(got.Err, ErrShardMismatch) {
						t.Errorf("Read(%s) = %+v, want an Err wrapping ErrShardMismatch", job, got)
					}
					mismatched++
				}
			}
			if mismatched == 0 {
				t.Error("no read met the mismatch")
			}
			t.Logf("%d of %d servers read unknown (mismatch), the rest alive", mismatched, len(jobs))

			logs := &logBuffer{}
			mustBeat(t, server(t, rdb, key, "late", Config{Shards: tt.reader, Logger: logs.logger()}))
			if !strings.Contains(logs.String(), "use another shard count") ||
				!strings.Contains(logs.String(), fmt.Sprintf("other_shards=[%d]", tt.writers)) {
				t.Errorf("a server at %d shards did not log the mismatch:\n%s", tt.reader, logs)
			}
			if _, err := reader.List(ctx); !errors.Is(err, ErrShardMismatch) {
				t.Errorf("List = %v, want ErrShardMismatch", err)
			}
		})
	}
}

// TestShardMarkLapses: once no server of a count has marked it for its
// mark's life (CheckEvery beats and a TTL), readers and servers of another
// count no longer see it, and the next mark drops it.
func TestShardMarkLapses(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb := r.client(t)
	key := testKey(t)
	if err := rdb.HSet(ctx, LayoutKey(key), "4", time.Now().Add(-time.Millisecond).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	p := server(t, rdb, key, "a", Config{Logger: logs.logger()})
	mustBeat(t, p)
	ageRun(t, rdb, key)
	if got := p.Read(ctx, "gone"); got.Status != Stopped {
		t.Errorf("Read(gone) = %+v, want stopped", got)
	}
	if strings.Contains(logs.String(), "another shard count") {
		t.Errorf("a lapsed mark was reported:\n%s", logs)
	}
	if got := rdb.HKeys(ctx, LayoutKey(key)).Val(); len(got) != 1 || got[0] != "1" {
		t.Errorf("layout fields %v, want [1]", got)
	}
}
