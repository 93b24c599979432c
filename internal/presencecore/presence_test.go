package presencecore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/redis/go-redis/v9"
)

// short is a timing set for tests that wait for real Redis expiry.
var short = Config{Beat: 100 * time.Millisecond, TTL: 300 * time.Millisecond}

// server returns a Presence for jobID on key with the timings of tmpl.
func server(tb testing.TB, rdb redis.UniversalClient, key, jobID string, tmpl Config) *Presence {
	tb.Helper()
	tmpl.Key, tmpl.JobID = key, jobID
	return newTestPresence(tb, rdb, tmpl)
}

func mustBeat(tb testing.TB, p *Presence) {
	tb.Helper()
	if err := p.Beat(context.Background()); err != nil {
		tb.Fatalf("Beat(%s): %v", p.cfg.JobID, err)
	}
}

// agePresenceRun makes the hash's Redis run look one TTL old or more, so that a
// missing beat is proof at once (the alternative is waiting one TTL).
func agePresenceRun(tb testing.TB, rdb redis.UniversalClient, key string) {
	tb.Helper()
	if err := rdb.HSet(context.Background(), key, MetaSince, "0").Err(); err != nil {
		tb.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()

	tests := []struct {
		name string
		run  func(t *testing.T, rdb *redis.Client, key string)
	}{
		{"alive after a beat, ExpiresIn about TTL", func(t *testing.T, rdb *redis.Client, key string) {
			a := server(t, rdb, key, "a", Config{})
			b := server(t, rdb, key, "b", Config{})
			mustBeat(t, a)
			got := b.Read(ctx, "a")
			if got.Status != Alive || got.Err != nil {
				t.Fatalf("Read(a) = %+v, want alive", got)
			}
			if got.ExpiresIn > DefaultTTL || got.ExpiresIn < DefaultTTL-time.Second {
				t.Errorf("ExpiresIn = %v, want about %v", got.ExpiresIn, DefaultTTL)
			}
			if st := b.IsAlive(ctx, "a"); st != Alive {
				t.Errorf("IsAlive(a) = %v", st)
			}
		}},
		{"stopped after expiry", func(t *testing.T, rdb *redis.Client, key string) {
			a := server(t, rdb, key, "a", short)
			b := server(t, rdb, key, "b", short)
			mustBeat(t, a)
			agePresenceRun(t, rdb, key)
			if got := b.Read(ctx, "a"); got.Status != Alive {
				t.Fatalf("right after the beat Read(a) = %+v, want alive", got)
			}
			eventually(t, 5*time.Second, "a to read stopped", func() bool {
				got := b.Read(ctx, "a")
				if got.Status == Unknown {
					t.Fatalf("Read(a) = %+v while waiting for expiry", got)
				}
				return got.Status == Stopped
			})
			if got := b.Read(ctx, "a"); got.ExpiresIn != 0 || got.Err != nil {
				t.Errorf("stopped reading = %+v, want no ExpiresIn and no Err", got)
			}
		}},
		{"never-seen server unknown for one TTL of a new run, then stopped", func(t *testing.T, rdb *redis.Client, key string) {
			a := server(t, rdb, key, "a", short)
			if got := a.Read(ctx, "ghost"); got.Status != Unknown || got.Err != nil || got.ExpiresIn != short.TTL {
				t.Fatalf("before any beat Read(ghost) = %+v, want unknown, nil Err, ExpiresIn TTL", got)
			}
			mustBeat(t, a) // creates the run meta
			got := a.Read(ctx, "ghost")
			if got.Status != Unknown || got.Err != nil || got.ExpiresIn <= 0 || got.ExpiresIn > short.TTL {
				t.Fatalf("after the first beat Read(ghost) = %+v, want unknown with 0 < ExpiresIn <= TTL", got)
			}
			eventually(t, 5*time.Second, "ghost to read stopped", func() bool {
				return a.Read(ctx, "ghost").Status == Stopped
			})
		}},
		{"Remove deletes our field", func(t *testing.T, rdb *redis.Client, key string) {
			a := server(t, rdb, key, "a", Config{})
			b := server(t, rdb, key, "b", Config{})
			mustBeat(t, a)
			agePresenceRun(t, rdb, key)
			if err := a.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.HExists(ctx, key, "a").Result(); err != nil || n {
				t.Fatalf("HEXISTS a = %v, %v after Remove", n, err)
			}
			if got := b.Read(ctx, "a"); got.Status != Stopped {
				t.Errorf("Read(a) after Remove = %+v, want stopped", got)
			}
			if !a.stale() {
				t.Errorf("Stale() = false after Remove")
			}
		}},
		{"our own JobID always alive", func(t *testing.T, rdb *redis.Client, key string) {
			a := server(t, rdb, key, "a", Config{})
			if st := a.IsAlive(ctx, "a"); st != Alive { // never beat
				t.Errorf("IsAlive(self) = %v, want alive", st)
			}
			_ = rdb.Close() // and even when Redis cannot be reached
			if st := a.IsAlive(ctx, "a"); st != Alive {
				t.Errorf("IsAlive(self) with a closed client = %v, want alive", st)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, r.client(t), testKey(t))
		})
	}
}

func TestReadUnknownWhenReadFails(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()

	closed := r.client(t)
	_ = closed.Close()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	tests := []struct {
		name      string
		rdb       redis.UniversalClient
		ctx       context.Context
		jobID     string
		wantErr   error // nil: any error
		listFails bool
	}{
		{"closed client", closed, ctx, "b", redis.ErrClosed, true},
		{"unreachable server", closedPortClient(t), ctx, "b", nil, true},
		{"cancelled context", r.client(t), cancelled, "b", context.Canceled, true},
		{"empty JobID", r.client(t), ctx, "", ErrInvalidJobID, false},
		{"meta field as JobID", r.client(t), ctx, MetaRun, ErrInvalidJobID, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := server(t, tt.rdb, testKey(t), "a", Config{})
			got := p.Read(tt.ctx, tt.jobID)
			if got.Status != Unknown || got.Err == nil {
				t.Fatalf("Read = %+v, want unknown with an error", got)
			}
			if tt.wantErr != nil && !errors.Is(got.Err, tt.wantErr) {
				t.Errorf("Err = %v, want it to wrap %v", got.Err, tt.wantErr)
			}
			if st := p.IsAlive(tt.ctx, tt.jobID); st != Unknown {
				t.Errorf("IsAlive = %v, want unknown", st)
			}
			if _, err := p.List(tt.ctx); (err != nil) != tt.listFails {
				t.Errorf("List error = %v, want failure %v", err, tt.listFails)
			}
		})
	}
}

func TestReadUnknownAfterRedisRestart(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb := r.client(t)
	key := testKey(t)
	timing := Config{Beat: 300 * time.Millisecond, TTL: time.Second}
	a := server(t, rdb, key, "a", timing)
	crashed := server(t, rdb, key, "crashed", timing)

	mustBeat(t, a)
	mustBeat(t, crashed)
	agePresenceRun(t, rdb, key)
	runBefore := rdb.HGet(ctx, key, MetaRun).Val()
	eventually(t, 5*time.Second, "crashed to read stopped before the restart", func() bool {
		return a.Read(ctx, "crashed").Status == Stopped
	})

	r.restart(t)

	// The hash is gone: a missing beat proves nothing.
	eventually(t, 5*time.Second, "a read to succeed after the restart", func() bool {
		return a.Read(ctx, "crashed").Err == nil
	})
	if got := a.Read(ctx, "crashed"); got.Status != Unknown || got.Err != nil {
		t.Fatalf("after restart, before any beat: Read(crashed) = %+v, want unknown, nil Err", got)
	}
	// The first beat under the new run recreates the meta; still unknown for one TTL.
	mustBeat(t, a)
	if r.real {
		if runAfter := rdb.HGet(ctx, key, MetaRun).Val(); runAfter == runBefore || runAfter == "" {
			t.Errorf("run id meta = %q after restart, before %q: want a new non-empty id", runAfter, runBefore)
		}
	}
	got := a.Read(ctx, "crashed")
	if got.Status != Unknown || got.Err != nil || got.ExpiresIn <= 0 || got.ExpiresIn > timing.TTL {
		t.Fatalf("right after the first beat of the new run: Read(crashed) = %+v, want unknown with 0 < ExpiresIn <= TTL", got)
	}
	if st := crashed.IsAlive(ctx, "a"); st != Alive {
		t.Errorf("a beating server reads %v after the restart, want alive", st)
	}
	eventually(t, 5*time.Second, "crashed to read stopped one TTL into the new run", func() bool {
		_ = a.Beat(ctx) // a stays alive meanwhile
		return a.Read(ctx, "crashed").Status == Stopped
	})
	if st := crashed.IsAlive(ctx, "a"); st != Alive {
		t.Errorf("a = %v, want alive", st)
	}
}

func TestReadUnknownWhenRunMetaChanges(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	timing := Config{Beat: 300 * time.Millisecond, TTL: time.Second}

	tests := []struct {
		name   string
		tamper func(rdb *redis.Client, key string) error
	}{
		{"stored run id differs (failover)", func(rdb *redis.Client, key string) error {
			return rdb.HSet(ctx, key, MetaRun, "deadbeef").Err()
		}},
		{"meta missing", func(rdb *redis.Client, key string) error {
			return rdb.HDel(ctx, key, MetaRun, MetaSince).Err()
		}},
		{"since missing", func(rdb *redis.Client, key string) error {
			return rdb.HDel(ctx, key, MetaSince).Err()
		}},
		{"since unreadable", func(rdb *redis.Client, key string) error {
			return rdb.HSet(ctx, key, MetaSince, "x").Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := r.client(t)
			key := testKey(t)
			logs := &logBuffer{}
			a := server(t, rdb, key, "a", Config{Beat: timing.Beat, TTL: timing.TTL, Logger: logs.logger()})
			mustBeat(t, a)
			agePresenceRun(t, rdb, key)
			if err := rdb.HSet(ctx, key, "gone", "1").Err(); err != nil { // expired long ago
				t.Fatal(err)
			}
			if got := a.Read(ctx, "gone"); got.Status != Stopped {
				t.Fatalf("before tampering Read(gone) = %+v, want stopped", got)
			}

			if err := tt.tamper(rdb, key); err != nil {
				t.Fatal(err)
			}
			for _, job := range []string{"gone", "never"} {
				if got := a.Read(ctx, job); got.Status != Unknown || got.Err != nil || got.ExpiresIn != timing.TTL {
					t.Errorf("Read(%s) = %+v, want unknown, nil Err, ExpiresIn TTL", job, got)
				}
			}
			if got := a.Read(ctx, "a"); got.Status != Alive {
				t.Errorf("a live beat reads %+v, want alive whatever the meta", got)
			}

			mustBeat(t, a) // rewrites the meta: a new run starts now
			if !strings.Contains(logs.String(), "new Redis run detected") {
				t.Errorf("no info log for the new run; logs:\n%s", logs)
			}
			if got := a.Read(ctx, "gone"); got.Status != Unknown || got.Err != nil {
				t.Errorf("after the meta reset Read(gone) = %+v, want unknown", got)
			}
			eventually(t, 5*time.Second, "gone to read stopped one TTL after the meta reset", func() bool {
				return a.Read(ctx, "gone").Status == Stopped
			})
		})
	}
}

func TestBeatCleansExpiredFields(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb := r.client(t)
	key := testKey(t)
	a := server(t, rdb, key, "a", Config{})
	mustBeat(t, a)

	const expired = 30
	for i := range expired {
		if err := rdb.HSet(ctx, key, fmt.Sprintf("gone-%d", i), "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, key, "junk", "not-a-number", "live", "99999999999999").Err(); err != nil {
		t.Fatal(err)
	}
	keep := []string{MetaRun, MetaSince, MetaEnc, "a", "live"}

	prev := rdb.HLen(ctx, key).Val()
	beats := 0
	for prev > int64(len(keep)) {
		if beats++; beats > 2000 {
			t.Fatalf("%d fields left after %d beats", prev, beats)
		}
		mustBeat(t, a)
		n := rdb.HLen(ctx, key).Val()
		if prev-n > 3 {
			t.Fatalf("one beat removed %d fields, want at most 3", prev-n)
		}
		prev = n
	}
	t.Logf("%d expired fields cleaned in %d beats", expired+1, beats)
	for _, f := range keep {
		if !rdb.HExists(ctx, key, f).Val() {
			t.Errorf("field %q was cleaned", f)
		}
	}
}

func TestList(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb := r.client(t)
	key := testKey(t)
	b := server(t, rdb, key, "b", Config{})
	a := server(t, rdb, key, "a", Config{})

	if got, err := a.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("List on a missing hash = %v, %v; want empty", got, err)
	}
	mustBeat(t, b)
	mustBeat(t, a)
	if err := rdb.HSet(ctx, key, "c", "1").Err(); err != nil {
		t.Fatal(err)
	}

	check := func(wantC Status) {
		t.Helper()
		got, err := a.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].JobID != "a" || got[1].JobID != "b" || got[2].JobID != "c" {
			t.Fatalf("List = %+v, want a, b, c (meta hidden, sorted)", got)
		}
		for _, e := range got[:2] {
			if e.Status != Alive || e.ExpiresIn <= DefaultTTL-time.Second || e.ExpiresIn > DefaultTTL {
				t.Errorf("entry %+v, want alive with about TTL left", e)
			}
		}
		if got[2].Status != wantC || got[2].ExpiresIn >= 0 {
			t.Errorf("entry %+v, want %v with negative ExpiresIn", got[2], wantC)
		}
	}
	check(Unknown) // the run is younger than one TTL
	agePresenceRun(t, rdb, key)
	check(Stopped)
}

func TestStaleFollowsLastBeat(t *testing.T) {
	r := startRedis(t)
	mock := mockclock.New()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := r.client(t)
	a := server(t, rdb, testKey(t), "a", Config{Clock: mock}) // stale after 10s-3s

	if !a.stale() {
		t.Fatal("Stale() = false before any beat")
	}
	sent := mock.Now()
	mustBeat(t, a)
	if a.stale() || !a.lastBeat().Equal(sent) {
		t.Fatalf("after a beat: stale() = %v, lastBeat() = %v; want false, %v", a.stale(), a.lastBeat(), sent)
	}
	mock.Add(7*time.Second - time.Millisecond)
	if a.stale() {
		t.Fatal("stale before TTL-FenceMargin passed")
	}
	mock.Add(time.Millisecond)
	if !a.stale() {
		t.Fatal("not stale once TTL-FenceMargin passed")
	}
	mustBeat(t, a)
	if a.stale() {
		t.Fatal("still stale after a new beat")
	}
}

func TestBeatErrors(t *testing.T) {
	r := startRedis(t)
	logs := &logBuffer{}
	a := server(t, r.client(t), testKey(t), "a", Config{Logger: logs.logger()})

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Beat(cancelled); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "presence beat: ") {
		t.Errorf("Beat(cancelled) = %v, want a wrapped context.Canceled", err)
	}
	if s := logs.String(); s != "" {
		t.Errorf("a cancelled beat logged:\n%s", s)
	}

	b := server(t, closedPortClient(t), testKey(t), "b", Config{Logger: logs.logger()})
	if err := b.Beat(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "presence beat: ") {
		t.Errorf("Beat on an unreachable Redis = %v, want a wrapped error", err)
	}
	if !b.stale() {
		t.Error("Stale() = false with no successful beat")
	}
}
