package presencecore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/redis/go-redis/v9"
)

// ownerOf reads the instance recorded for jobID in its shard's owners hash.
func ownerOf(tb testing.TB, rdb redis.UniversalClient, p *Presence, jobID string) string {
	tb.Helper()
	v, err := rdb.HGet(context.Background(), p.shardOf(jobID).owners, jobID).Result()
	if err != nil && err != redis.Nil {
		tb.Fatal(err)
	}
	return v
}

// writeBeat writes jobID's beat by hand, as another process would: expiring
// in (negative: expired) on the local clock, which the test Redis shares,
// and owned by owner ("" writes no owner, as when the owners hash lost it).
func writeBeat(tb testing.TB, rdb redis.UniversalClient, p *Presence, jobID, owner string, in time.Duration) {
	tb.Helper()
	ctx := context.Background()
	s := p.shardOf(jobID)
	if err := rdb.HSet(ctx, s.key, jobID, strconv.FormatInt(time.Now().Add(in).UnixMilli(), 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	if owner == "" {
		if err := rdb.HDel(ctx, s.owners, jobID).Err(); err != nil {
			tb.Fatal(err)
		}
		return
	}
	if err := rdb.HSet(ctx, s.owners, jobID, owner).Err(); err != nil {
		tb.Fatal(err)
	}
}

// TestClaim: a JobID is claimed at once when free or left cleanly, after
// the earlier beat expires when its process is gone, and refused when its
// process is alive.
func TestClaim(t *testing.T) {
	r := startRedis(t)
	tests := []struct {
		name string
		// before prepares the JobID "a" under key; it returns a function the
		// test calls once the claim has returned (nil: none).
		before func(t *testing.T, rdb *redis.Client, key string) func()
		// wantWait: the claim must wait for an earlier beat to lapse.
		wantWait bool
		// wantOther: the claim must be refused, naming this instance.
		wantOther *string
	}{
		{"free JobID: at once", func(t *testing.T, rdb *redis.Client, key string) func() {
			return nil
		}, false, nil},
		{"earlier process closed cleanly: at once", func(t *testing.T, rdb *redis.Client, key string) func() {
			old := server(t, rdb, key, "a", Config{Instance: "old"})
			mustBeat(t, old)
			if err := old.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := old.Remove(context.Background()); err != nil {
				t.Fatal(err)
			}
			return nil
		}, false, nil},
		{"earlier beat expired: at once", func(t *testing.T, rdb *redis.Client, key string) func() {
			old := server(t, rdb, key, "a", Config{Instance: "old"})
			writeBeat(t, rdb, old, "a", "old", -time.Second)
			return nil
		}, false, nil},
		{"crashed process: once its beat expires", func(t *testing.T, rdb *redis.Client, key string) func() {
			old := server(t, rdb, key, "a", Config{Instance: "old", Beat: short.Beat, TTL: short.TTL})
			mustBeat(t, old) // and never again
			return nil
		}, true, nil},
		{"a live beat whose owner entry is lost (the owners hash evicted or deleted): at once", func(t *testing.T, rdb *redis.Client, key string) func() {
			p := server(t, rdb, key, "probe", Config{})
			writeBeat(t, rdb, p, "a", "", short.TTL)
			return nil
		}, false, nil},
		{"live process: refused", func(t *testing.T, rdb *redis.Client, key string) func() {
			live := server(t, rdb, key, "a", Config{Instance: "live", Beat: short.Beat, TTL: short.TTL})
			live.Start()
			eventually(t, 5*time.Second, "the live process's first beat", func() bool { return !live.stale() })
			return func() {
				if got := ownerOf(t, rdb, live, "a"); got != "live" {
					t.Errorf("owner after the refused claim = %q, want live", got)
				}
				if live.stale() {
					t.Error("the live process lost its lease to a refused claim")
				}
			}
		}, true, ptr("live")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			key := testKey(t)
			after := tt.before(t, rdb, key)
			// A mock clock that nobody moves: a claim that returns at once
			// never waited on it; one that must wait gets the real clock.
			var clk clock.Clock = mockclock.New()
			if tt.wantWait {
				clk = clock.New()
			}
			logs := &logBuffer{}
			p := server(t, rdb, key, "a", Config{Instance: "new", Beat: short.Beat, TTL: short.TTL, Clock: clk, Logger: logs.logger()})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err := p.Claim(ctx)
			waited := time.Since(start)
			if after != nil {
				after()
			}

			if tt.wantOther != nil {
				var inUse *InUseError
				if !errors.As(err, &inUse) || !errors.Is(err, ErrJobIDInUse) || inUse.Other != *tt.wantOther || inUse.Fenced {
					t.Fatalf("Claim = %v, want an *InUseError naming %q, not fenced", err, *tt.wantOther)
				}
				if waited > short.TTL {
					t.Errorf("refused after %v; a live process renews its beat every Beat (%v)", waited, short.Beat)
				}
				if !p.stale() || ownerOf(t, rdb, p, "a") == "new" {
					t.Error("a refused claim holds a lease or wrote its owner")
				}
				return
			}
			if err != nil {
				t.Fatalf("Claim = %v, want nil", err)
			}
			if got := ownerOf(t, rdb, p, "a"); got != "new" {
				t.Errorf("owner = %q, want new", got)
			}
			if p.stale() {
				t.Error("no lease after the claim")
			}
			if tt.wantWait {
				if waited > short.TTL+short.Beat {
					t.Errorf("claim took %v, want at most about one TTL (%v)", waited, short.TTL)
				}
				// One INFO line says the claim waits, at most how long, and why.
				var lines []string
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "waiting at most") {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "at_most=") ||
					!strings.Contains(lines[0], "a restarted process keeps its JobID") {
					t.Errorf("want one INFO line of the wait naming its bound and its reason:\n%s", logs)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestClaimEndsWithContext: a claim waiting on a live beat ends with its
// context, wrapping its error.
func TestClaimEndsWithContext(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	key := testKey(t)
	probe := server(t, rdb, key, "probe", Config{})
	writeBeat(t, rdb, probe, "a", "live", time.Minute)
	p := server(t, rdb, key, "a", Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.Claim(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim = %v, want context.DeadlineExceeded", err)
	}
}

// TestBeatConflictFences: a running server whose beat meets another
// instance's beat of its JobID fences itself at once: the lease lapses
// (OnLapse, Holds false), an error names both instances, and no beat sent
// before it renews the lease.
func TestBeatConflictFences(t *testing.T) {
	r := startRedis(t)
	tests := []struct {
		name string
		// in is when the intruder's beat expires from now (negative: it
		// expired already, the intruder is gone).
		in time.Duration
		// renews: a later beat starts a new lease (the field is ours again).
		renews bool
	}{
		{"another instance beats the JobID now", time.Minute, false},
		{"another instance beat the JobID and is gone", -time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return r.client(t, h) })
			eventually(t, 5*time.Second, "first beat", func() bool { return g.p.Holds(1) })
			writeBeat(t, g.rdb, g.p, "a", "intruder", tt.in)

			n := g.p.beatsDone.Load()
			g.mock.Add(DefaultBeat)
			g.waitAttempts(t, n+1)
			if g.p.Holds(1) {
				t.Fatal("Holds(1) after the beat that met another instance")
			}
			eventually(t, 5*time.Second, "OnLapse", func() bool { return slices.Equal(g.lapsed(), []uint64{1}) })
			logs := g.logs.String()
			if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "other_instance=intruder") ||
				!strings.Contains(logs, "instance="+g.p.Instance()) {
				t.Errorf("no error naming both instances:\n%s", logs)
			}

			g.tick(t)
			g.tick(t)
			if tt.renews {
				eventually(t, 5*time.Second, "a new lease", func() bool { return g.p.Holds(2) })
				if got := ownerOf(t, g.rdb, g.p, "a"); got != g.p.Instance() {
					t.Errorf("owner = %q, want ours", got)
				}
			} else {
				if !g.p.stale() || g.p.Lease().Gen != 1 {
					t.Errorf("lease %+v while another instance beats the JobID; want generation 1, lapsed", g.p.Lease())
				}
				if got := ownerOf(t, g.rdb, g.p, "a"); got != "intruder" {
					t.Errorf("owner = %q: the live intruder's beat was overwritten", got)
				}
				if c := strings.Count(g.logs.String(), "level=ERROR"); c != 1 {
					t.Errorf("%d error logs in three refused beats, want 1", c)
				}
			}
			if got := g.lapsed(); !slices.Equal(got, []uint64{1}) {
				t.Errorf("OnLapse %v, want [1]", got)
			}
		})
	}
}

// TestConflictBlocksEarlierBeats: after a conflict, a beat sent before it
// was seen neither extends nor renews the lease.
func TestConflictBlocksEarlierBeats(t *testing.T) {
	mock := mockclock.New()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mock.Set(t0)
	p := newTestPresence(t, closedPortClient(t), Config{Key: testKey(t), JobID: "a", Clock: mock})
	p.extend(t0, t0)
	mock.Add(time.Second)
	p.conflict(&InUseError{JobID: "a", Instance: p.Instance(), Other: "intruder", Fenced: true}, "test")
	if p.Holds(1) {
		t.Fatal("Holds(1) after the conflict")
	}
	for _, sent := range []time.Time{t0.Add(500 * time.Millisecond), mock.Now().Add(-time.Millisecond)} {
		if p.extend(sent, mock.Now()) || p.Holds(1) || p.Lease().Gen != 1 {
			t.Fatalf("a beat sent at %v, before the conflict, moved the lease to %+v", sent, p.Lease())
		}
	}
	mock.Add(time.Millisecond)
	if !p.extend(mock.Now(), mock.Now()) || !p.Holds(2) {
		t.Fatalf("a beat sent after the conflict did not start generation 2: %+v", p.Lease())
	}
}

// TestRemoveLeavesAnotherInstancesBeat: Remove deletes only this instance's
// beat.
func TestRemoveLeavesAnotherInstancesBeat(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		owner   string // who owns the field when Remove runs ("" none)
		deleted bool
	}{
		{"our beat", "ours", true},
		{"a beat without owner", "", true},
		{"another instance's beat", "other", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			p := server(t, rdb, testKey(t), "a", Config{Instance: "ours"})
			writeBeat(t, rdb, p, "a", tt.owner, time.Minute)
			if err := p.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			exists := rdb.HExists(ctx, p.KeyOf("a"), "a").Val()
			owned := rdb.HExists(ctx, p.own.owners, "a").Val()
			if exists == tt.deleted || owned == tt.deleted {
				t.Errorf("after Remove: field %v, owner %v; want deleted %v", exists, owned, tt.deleted)
			}
		})
	}
}

func TestNewValidatesInstanceAndShards(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"random instance", Config{}, true},
		{"given instance", Config{Instance: "pod-7_b"}, true},
		{"instance with a colon", Config{Instance: "a:b"}, false},
		{"instance too long", Config{Instance: strings.Repeat("x", 65)}, false},
		{"16 shards", Config{Shards: 16}, true},
		{"negative shards", Config{Shards: -1}, false},
		{"too many shards", Config{Shards: MaxShards + 1}, false},
		{"hash-tagged key, one shard", Config{Key: "{game}:CKPresence"}, true},
		{"hash-tagged key, shards", Config{Key: "{game}:CKPresence", Shards: 2}, false},
		{"lone brace", Config{Key: "game{:CKPresence"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.Key == "" {
				cfg.Key = "ns:CKPresence"
			}
			cfg.JobID = "a"
			p, err := New(rdb, cfg)
			if tt.ok != (err == nil) {
				t.Fatalf("New = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			if err == nil && (checkInstance(p.Instance()) != nil || (tt.cfg.Instance != "" && p.Instance() != tt.cfg.Instance)) {
				t.Errorf("Instance() = %q", p.Instance())
			}
		})
	}
}

// A running server whose owner entry vanishes (the owners hash evicted by
// an allkeys policy, or deleted by hand) re-claims it at its next full
// beat: nothing else beats its JobID, so it is no intruder, and it does not
// fence itself.
func TestOwnerEntryLostIsReclaimed(t *testing.T) {
	r := startRedis(t)
	for _, what := range []string{"owners hash deleted", "whole presence hash evicted"} {
		t.Run(what, func(t *testing.T) {
			rdb := r.client(t)
			key := testKey(t)
			p := server(t, rdb, key, "a", Config{Instance: "inst-a"})
			mustBeat(t, p)
			s := p.shardOf("a")
			keys := []string{s.owners}
			if what == "whole presence hash evicted" {
				keys = append(keys, s.key)
			}
			if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
				t.Fatal(err)
			}
			for range 3 { // full checks, as the loop makes every CheckEvery beats
				mustBeat(t, p)
			}
			if p.stale() {
				t.Fatal("the server fenced itself over its own lost owner entry")
			}
			if got := ownerOf(t, rdb, p, "a"); got != "inst-a" {
				t.Errorf("owner after the re-claim = %q, want inst-a", got)
			}
		})
	}
}
