package presencecore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/redis/go-redis/v9"
)

// commandCalls reads the calls of each command from INFO commandstats
// ("cmdstat_hincrby:calls=3,..." gives "hincrby": 3).
func commandCalls(tb testing.TB, rdb redis.UniversalClient) map[string]int64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				calls[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls
}

// TestBeatCommands: the loop's common beat is two Redis commands inside one
// script call (TIME, HINCRBY); a full check reads INFO server. Counted by
// Redis itself (INFO commandstats), so it needs a real redis-server.
func TestBeatCommands(t *testing.T) {
	r := startRedis(t)
	if !r.real {
		t.Skip("miniredis keeps no command statistics")
	}
	ctx := context.Background()
	tests := []struct {
		name string
		beat func(p *Presence) error
		want map[string]int64 // calls per beat; the others must be 0
	}{
		{"loop beat, common case", func(p *Presence) error { _, err := p.beat(ctx, true); return err },
			map[string]int64{"evalsha": 1, "time": 1, "hincrby": 1}},
		// beat.lua: TIME, HMGET, HGET (the owner), INFO, HSET x2 (the beat,
		// the owner with the encoding mark), HRANDFIELD x3 (the beats, the
		// owners, the load hash), and one HMGET of the sampled owners' beats
		// unless both samples were MetaEnc (counted apart); then shards.lua:
		// TIME, HSET, HGETALL. Without Config.Sessions no count is written.
		{"Beat: a full check, then the shard-count mark", func(p *Presence) error { return p.Beat(ctx) },
			map[string]int64{"evalsha": 2, "time": 2, "hmget": 1, "hget": 1, "info": 1, "hset": 3, "hrandfield": 3, "hgetall": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			p := server(t, rdb, testKey(t), "a", Config{})
			mustBeat(t, p) // claims, loads the script
			for _, f := range []string{"gone-1", "gone-2"} {
				if err := rdb.HSet(ctx, p.own.owners, f, "x").Err(); err != nil { // orphans make cleaning look up the beat
					t.Fatal(err)
				}
			}
			const beats = 5
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for range beats {
				if err := tt.beat(p); err != nil {
					t.Fatal(err)
				}
			}
			got := commandCalls(t, rdb)
			delete(got, "config|resetstat")
			if tt.want["hmget"] == 1 && tt.want["info"] == 1 { // the cleaning's lookup: at most one a beat
				if n := got["hmget"] - beats; n < 0 || n > beats {
					t.Errorf("hmget: %d calls in %d beats, want %d to %d", got["hmget"], beats, beats, 2*beats)
				}
				got["hmget"] = beats
			}
			for name, n := range got {
				if name == "hdel" { // cleaning, when it finds something
					continue
				}
				if w := tt.want[name] * beats; n != w {
					t.Errorf("%s: %d calls in %d beats, want %d", name, n, beats, w)
				}
			}
			for name, w := range tt.want {
				if got[name] != w*beats {
					t.Errorf("%s: %d calls in %d beats, want %d", name, got[name], beats, w*beats)
				}
			}
			t.Logf("%d beats: %v", beats, got)
		})
	}
}

// TestLoopDetectsNewRun: the loop's fast beats do not read INFO, so a new
// Redis run whose hash survived (a failover, a restart with persistence) is
// written into the meta by the first full check: after a failed beat, after
// Redis forgot the script, or at the latest on the CheckEvery-th beat.
// Readers never wait for that: they compare the run id themselves.
func TestLoopDetectsNewRun(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	tests := []struct {
		name string
		// between runs after the meta was made to name another run; it
		// returns how many loop beats may pass before the meta is reset.
		between func(t *testing.T, p *Presence, hook *faultHook, rdb *redis.Client) int
	}{
		{"no sign: the CheckEvery-th beat", func(t *testing.T, p *Presence, hook *faultHook, rdb *redis.Client) int {
			return CheckEvery
		}},
		{"a failed beat: the next one", func(t *testing.T, p *Presence, hook *faultHook, rdb *redis.Client) int {
			hook.fail.Store(true)
			if _, err := p.beat(ctx, true); !errors.Is(err, errInjected) {
				t.Fatalf("beat with the fault = %v", err)
			}
			hook.fail.Store(false)
			return 1
		}},
		{"Redis forgot the script (NOSCRIPT): that beat", func(t *testing.T, p *Presence, hook *faultHook, rdb *redis.Client) int {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			return 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hook := newFaultHook()
			rdb := r.client(t, hook)
			logs := &logBuffer{}
			key := testKey(t)
			p := server(t, rdb, key, "a", Config{Logger: logs.logger()})
			reader := server(t, rdb, key, "b", Config{})
			mustBeat(t, p)
			agePresenceRun(t, rdb, key)
			if err := rdb.HSet(ctx, key, "gone", "1", MetaRun, "deadbeef").Err(); err != nil {
				t.Fatal(err)
			}
			if got := reader.Read(ctx, "gone"); got.Status != Unknown || got.Err != nil {
				t.Fatalf("Read(gone) with the meta of another run = %+v, want unknown at once", got)
			}
			within := tt.between(t, p, hook, rdb)
			const newRun = "new Redis run detected"
			for i := 1; !strings.Contains(logs.String(), newRun); i++ {
				if i > within {
					t.Fatalf("meta not reset after %d loop beats; logs:\n%s", within, logs)
				}
				if _, err := p.beat(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
			if run := rdb.HGet(ctx, key, MetaRun).Val(); run == "deadbeef" {
				t.Errorf("run meta still %q", run)
			}
			if got := reader.Read(ctx, "gone"); got.Status != Unknown || got.Err != nil || got.ExpiresIn <= 0 {
				t.Errorf("right after the reset Read(gone) = %+v, want unknown for one TTL", got)
			}
		})
	}
}

// TestFastPathFallsBack: the fast path proves only that the field holds what
// this instance wrote last; anything else goes to the full path, which puts
// the field right (or refuses) as the table says, and a later loop beat is
// fast again.
func TestFastPathFallsBack(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		tamper  func(t *testing.T, rdb *redis.Client, p *Presence)
		outcome presencescript.BeatOutcome
	}{
		{"field deleted (a lost hash)", func(t *testing.T, rdb *redis.Client, p *Presence) {
			if err := rdb.Del(ctx, p.KeyOf("a")).Err(); err != nil {
				t.Fatal(err)
			}
		}, presencescript.BeatWritten},
		{"field not an integer", func(t *testing.T, rdb *redis.Client, p *Presence) {
			if err := rdb.HSet(ctx, p.KeyOf("a"), "a", "junk").Err(); err != nil {
				t.Fatal(err)
			}
		}, presencescript.BeatWritten},
		{"our answer was lost (the field is ahead of what we expect)", func(t *testing.T, rdb *redis.Client, p *Presence) {
			p.mu.Lock()
			p.lastExpiry -= 1000
			p.mu.Unlock()
		}, presencescript.BeatWritten},
		{"another instance's live beat", func(t *testing.T, rdb *redis.Client, p *Presence) {
			writeBeat(t, rdb, p, "a", "other", time.Minute)
		}, presencescript.BeatRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			p := server(t, rdb, testKey(t), "a", Config{})
			mustBeat(t, p)
			tt.tamper(t, rdb, p)
			tampered, _ := rdb.HGet(ctx, p.KeyOf("a"), "a").Result()
			ans, err := p.beat(ctx, true)
			if ans.Outcome != tt.outcome {
				t.Fatalf("beat = %+v, %v; want outcome %v", ans, err, tt.outcome)
			}
			got := rdb.HGet(ctx, p.KeyOf("a"), "a").Val()
			if tt.outcome == presencescript.BeatRefused {
				if got != tampered || !errors.Is(err, ErrJobIDInUse) {
					t.Fatalf("refused beat changed the field %q -> %q (err %v)", tampered, got, err)
				}
				return
			}
			if err != nil || got != strconv.FormatInt(ans.ExpiresAt.UnixMilli(), 10) || ownerOf(t, rdb, p, "a") != p.Instance() {
				t.Fatalf("beat = %v; field %q (tampered %q), answer %v, owner %q", err, got, tampered, ans.ExpiresAt.UnixMilli(), ownerOf(t, rdb, p, "a"))
			}
			p.mu.Lock()
			want := p.lastExpiry
			p.mu.Unlock()
			if want != ans.ExpiresAt.UnixMilli() {
				t.Errorf("lastExpiry %d, answer %d", want, ans.ExpiresAt.UnixMilli())
			}
		})
	}
}

func TestBeatArgsRoundTrip(t *testing.T) {
	tests := []presencescript.BeatArgs{
		{JobID: "a", TTL: 10 * time.Second, Instance: "i1"},
		{JobID: "server-7", TTL: time.Second, Instance: "x", Expected: time.UnixMilli(1_900_000_000_123), Check: true},
	}
	for _, a := range tests {
		t.Run(a.JobID, func(t *testing.T) {
			argv := presencescript.Beat.Wire(a)
			got, err := presencescript.ParseBeatArgs(argv)
			if err != nil || got != a {
				t.Fatalf("presencescript.ParseBeatArgs(%q) = %+v, %v; want %+v", argv, got, err, a)
			}
		})
	}
	if _, err := presencescript.ParseBeatArgs([]string{"a", "1000"}); !errors.Is(err, ErrUnexpectedReply) {
		t.Errorf("a two-argument call = %v, want ErrUnexpectedReply", err)
	}
}

func TestParseBeatAnswer(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want presencescript.BeatAnswer
		ok   bool
	}{
		{"written", []any{int64(0), int64(2000), int64(1), "", int64(0), int64(1000)},
			presencescript.BeatAnswer{Outcome: presencescript.BeatWritten, ExpiresAt: time.UnixMilli(2000), Reset: true, At: time.UnixMilli(1000)}, true},
		{"refused", []any{int64(1), int64(0), int64(0), "other", int64(5000), int64(1000)},
			presencescript.BeatAnswer{Outcome: presencescript.BeatRefused, Other: "other", OtherExpiresAt: time.UnixMilli(5000), At: time.UnixMilli(1000)}, true},
		{"taken over", []any{int64(2), int64(2000), int64(0), "old", int64(900), int64(1000)},
			presencescript.BeatAnswer{Outcome: presencescript.BeatTakenOver, ExpiresAt: time.UnixMilli(2000), Other: "old", OtherExpiresAt: time.UnixMilli(900), At: time.UnixMilli(1000)}, true},
		{"unknown code", []any{int64(7), int64(0), int64(0), "", int64(0), int64(0)}, presencescript.BeatAnswer{}, false},
		{"old shape", []any{int64(2000), int64(0)}, presencescript.BeatAnswer{}, false},
		{"not an array", "x", presencescript.BeatAnswer{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := presencescript.ParseBeatAnswer(tt.v)
			if tt.ok != (err == nil) || got != tt.want {
				t.Fatalf("presencescript.ParseBeatAnswer = %+v, %v; want %+v, ok %v", got, err, tt.want, tt.ok)
			}
		})
	}
}
