package presencecore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/redis/go-redis/v9"
)

// loopRig is one Presence running its loop on a mock clock, with a fault hook
// on its client and its logs captured.
type loopRig struct {
	mock *mockclock.Mock
	hook *faultHook
	rdb  *redis.Client
	logs *logBuffer
	p    *Presence

	mu     sync.Mutex
	lapses []uint64 // OnLapse calls, in order
}

// lapsed returns the generations OnLapse reported so far.
func (g *loopRig) lapsed() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.lapses)
}

// newLoopRig starts a loop against rdbFor(hook) on a mock clock, with the
// timings of cfg (Beat must stay DefaultBeat), and waits for its first beat
// attempt.
func newLoopRig(tb testing.TB, cfg Config, rdbFor func(*faultHook) *redis.Client) *loopRig {
	tb.Helper()
	g := &loopRig{mock: mockclock.New(), hook: newFaultHook(), logs: &logBuffer{}}
	g.mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g.rdb = rdbFor(g.hook)
	cfg.Key, cfg.JobID, cfg.Clock, cfg.Logger = testKey(tb), "a", g.mock, g.logs.logger()
	cfg.OnLapse = func(gen uint64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.lapses = append(g.lapses, gen)
	}
	g.p = newTestPresence(tb, g.rdb, cfg)
	g.p.Start()
	g.waitAttempts(tb, 1)
	return g
}

// waitAttempts waits until n beats have returned in all, and the shard
// mark a full check starts after its beat (see markShardsAsync) has too, so
// that no call of the loop is still under way.
func (g *loopRig) waitAttempts(tb testing.TB, n int64) {
	tb.Helper()
	eventually(tb, 10*time.Second, "beat attempts", func() bool {
		return g.p.beatsDone.Load() >= n && !g.p.marking.Load()
	})
}

// tick moves the mock clock one Beat and waits for the beat it triggers to
// return.
func (g *loopRig) tick(tb testing.TB) {
	tb.Helper()
	n := g.p.beatsDone.Load()
	g.mock.Add(DefaultBeat)
	g.waitAttempts(tb, n+1)
}

func (g *loopRig) count(s string) int { return strings.Count(g.logs.String(), s) }

func TestLoopLogsFailureOnceAndRecovery(t *testing.T) {
	r := startRedis(t)
	// A long TTL keeps this test about logging: no stale episode in 4 beats.
	g := newLoopRig(t, Config{TTL: time.Minute}, func(h *faultHook) *redis.Client { return r.client(t, h) })
	eventually(t, 5*time.Second, "first beat to succeed", func() bool { return !g.p.lastBeat().IsZero() })

	const warn, recovered = "presence beat failing", "presence beat recovered"
	for round := 1; round <= 2; round++ {
		g.hook.fail.Store(true)
		for range 3 {
			g.tick(t)
		}
		if n := g.count(warn); n != round {
			t.Fatalf("round %d: %d failure warnings, want %d; logs:\n%s", round, n, round, g.logs)
		}
		g.hook.fail.Store(false)
		g.tick(t)
		eventually(t, 5*time.Second, "recovery log", func() bool { return g.count(recovered) == round })
	}
	if s := g.logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "failed_beats=3") {
		t.Errorf("logs lack the warning level or failure count:\n%s", s)
	}
	if got := g.lapsed(); len(got) != 0 {
		t.Errorf("OnLapse called: %v", got)
	}
}

func TestOnLapse(t *testing.T) {
	r := startRedis(t)
	fenceAfter := DefaultTTL - DefaultBeat // 7s with the defaults

	t.Run("no beat ever acknowledged: no lease, nothing to lapse", func(t *testing.T) {
		g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return closedPortClient(t, h) })
		for range 5 {
			g.tick(t)
		}
		if got := g.lapsed(); len(got) != 0 || !g.p.stale() || g.p.Lease().Gen != 0 {
			t.Fatalf("OnLapse %v, Stale %v, Lease %+v; want no call, stale, generation 0", got, g.p.stale(), g.p.Lease())
		}
	})

	t.Run("not while beats succeed", func(t *testing.T) {
		g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return r.client(t, h) })
		for range 20 { // one minute of virtual time
			g.tick(t)
			if g.p.stale() {
				t.Fatal("Stale() while beats succeed")
			}
		}
		if got := g.lapsed(); len(got) != 0 || g.p.Lease().Gen != 1 {
			t.Errorf("OnLapse %v, generation %d while beats succeed; want none, 1", got, g.p.Lease().Gen)
		}
	})

	t.Run("fires TTL-FenceMargin after the last acknowledged beat, once per generation", func(t *testing.T) {
		g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return r.client(t, h) })
		for gen := uint64(1); gen <= 2; gen++ {
			eventually(t, 5*time.Second, "a successful beat", func() bool { return !g.p.stale() })
			if got := g.p.Lease().Gen; got != gen {
				t.Fatalf("generation %d, want %d", got, gen)
			}
			deadline := g.p.lastBeat().Add(fenceAfter)
			g.hook.fail.Store(true)
			g.mock.Set(deadline.Add(-time.Millisecond)) // the ticks on the way fail
			if got := g.lapsed(); len(got) != int(gen-1) || !g.p.Holds(gen) {
				t.Fatalf("generation %d, 1ms before the deadline: OnLapse %v, Holds %v", gen, got, g.p.Holds(gen))
			}
			g.mock.Add(time.Millisecond)
			if g.p.Holds(gen) {
				t.Fatal("Holds() = true at the deadline, before the fence goroutine ran")
			}
			eventually(t, 5*time.Second, "OnLapse", func() bool { return len(g.lapsed()) == int(gen) })
			g.tick(t)
			g.tick(t)
			g.hook.fail.Store(false)
			g.tick(t) // recovers under a new generation
			eventually(t, 5*time.Second, "a new lease", func() bool { return g.p.Holds(gen + 1) })
			if g.p.Holds(gen) {
				t.Fatalf("the lapsed generation %d holds again after a successful beat", gen)
			}
		}
		if got := g.lapsed(); !slices.Equal(got, []uint64{1, 2}) {
			t.Errorf("OnLapse calls %v, want [1 2]", got)
		}
	})
}

func TestCloseStopsLoop(t *testing.T) {
	r := startRedis(t)
	g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return r.client(t, h) })
	g.tick(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if err := g.p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := g.hook.evalSHA.Load()
	field := g.rdb.HGet(ctx, g.p.cfg.Key, "a").Val()

	g.p.Start() // no restart after Close
	g.mock.Add(10 * DefaultBeat)
	if err := g.p.Beat(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Beat after Close = %v, want ErrClosed", err)
	}
	if n := g.hook.evalSHA.Load(); n != before {
		t.Errorf("%d beats sent after Close", n-before)
	}
	if got := g.rdb.HGet(ctx, g.p.cfg.Key, "a").Val(); got != field {
		t.Errorf("field changed after Close: %q -> %q", field, got)
	}
	if err := g.p.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := g.p.Read(ctx, "a"); got.Status != Alive {
		t.Errorf("Read after Close = %+v; reads should keep working and Close should not remove the field", got)
	}
	if got := g.lapsed(); len(got) != 0 {
		t.Errorf("OnLapse called after Close: %v", got)
	}
}

func TestCloseCancelsBeatInFlight(t *testing.T) {
	r := startRedis(t)
	hook := newFaultHook()
	logs := &logBuffer{}
	p := newTestPresence(t, r.client(t, hook), Config{Key: testKey(t), JobID: "a", Logger: logs.logger()})

	hook.block.Store(true)
	errc := make(chan error, 1)
	go func() { errc <- p.Beat(context.Background()) }()
	<-hook.entered

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close cancelled the beat and waited for it; the goroutine that called
	// Beat hands its result over just after.
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("in-flight Beat = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight beat did not end with Close")
	}
	if s := logs.String(); s != "" {
		t.Errorf("a cancelled beat logged:\n%s", s)
	}
}

func TestCloseBeforeStart(t *testing.T) {
	r := startRedis(t)
	p := newTestPresence(t, r.client(t), Config{Key: testKey(t), JobID: "a"})
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
}
