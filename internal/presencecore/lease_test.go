package presencecore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/redis/go-redis/v9"
)

func TestLapsedGen(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		l    Lease
		want uint64
	}{
		{"no lease yet", Lease{}, 0},
		{"first generation holds", Lease{Gen: 1, Until: now.Add(time.Second)}, 0},
		{"first generation at its deadline", Lease{Gen: 1, Until: now}, 1},
		{"renewed: the older generations lapsed", Lease{Gen: 3, Until: now.Add(time.Second)}, 2},
		{"renewed and lapsed again", Lease{Gen: 3, Until: now.Add(-time.Second)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lapsedGen(tc.l, now); got != tc.want {
				t.Errorf("lapsedGen(%+v) = %d, want %d", tc.l, got, tc.want)
			}
		})
	}
}

// TestLeaseLapsesWhileBeatsHang: a Redis that stops answering (calls hang,
// whatever their context says) neither delays the lapse nor lets a late
// answer extend the lease.
func TestLeaseLapsesWhileBeatsHang(t *testing.T) {
	r := startRedis(t)
	g := newLoopRig(t, Config{}, func(h *faultHook) *redis.Client { return r.client(t, h) })
	eventually(t, 5*time.Second, "first beat", func() bool { return g.p.Holds(1) })
	deadline := g.p.lastBeat().Add(DefaultTTL - DefaultBeat)

	g.hook.hang.Store(true)
	for range 2 { // two beats hang; neither may hold the loop or the deadline
		n := g.hook.evalSHA.Load()
		g.mock.Add(DefaultBeat)
		<-g.hook.entered
		if g.hook.evalSHA.Load() != n {
			t.Fatal("a hung beat finished")
		}
	}
	g.mock.Set(deadline)
	if g.p.Holds(1) {
		t.Fatal("Holds(1) at the deadline while beats hang")
	}
	eventually(t, 5*time.Second, "OnLapse while beats hang", func() bool { return len(g.lapsed()) == 1 })

	// The hung beats reach Redis now, long after their deadlines: they prove
	// nothing, and generation 1 never holds again, whatever answers next.
	attempts := g.hook.evalSHA.Load()
	g.hook.unhang()
	eventually(t, 5*time.Second, "the hung beats to finish", func() bool { return g.hook.evalSHA.Load() >= attempts+2 })
	if g.p.Holds(1) {
		t.Fatal("generation 1 holds again after late answers")
	}
	g.tick(t) // an answer in time: a new generation
	eventually(t, 5*time.Second, "a new lease", func() bool { return g.p.Holds(2) })
	if g.p.Holds(1) {
		t.Error("generation 1 holds again")
	}
	if got := g.lapsed(); !slices.Equal(got, []uint64{1}) {
		t.Errorf("OnLapse calls %v, want [1]", got)
	}
}

// TestBeatAnsweredLateFails: a beat whose answer comes after its deadline
// (one Beat) fails with ErrBeatTimeout and leaves no lease, even though it
// landed in Redis.
func TestBeatAnsweredLateFails(t *testing.T) {
	r := startRedis(t)
	mock := mockclock.New()
	mock.Set(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	hook := newFaultHook()
	rdb := r.client(t, hook)
	logs := &logBuffer{}
	p := newTestPresence(t, rdb, Config{Key: testKey(t), JobID: "a", Clock: mock, Logger: logs.logger()})
	if err := presencescript.Beat.Load(context.Background(), rdb); err != nil { // no EVAL fallback after the hang
		t.Fatal(err)
	}

	hook.hang.Store(true)
	errc := make(chan error, 1)
	go func() { errc <- p.Beat(context.Background()) }()
	<-hook.entered
	mock.Add(DefaultBeat)
	if err := <-errc; !errors.Is(err, ErrBeatTimeout) {
		t.Fatalf("Beat past its deadline = %v, want ErrBeatTimeout", err)
	}
	hook.unhang()
	eventually(t, 5*time.Second, "the late beat to land", func() bool { return hook.evalSHA.Load() == 1 })
	if got := p.Read(context.Background(), "a"); got.Status != Alive {
		t.Fatalf("the late beat did not land: %+v", got)
	}
	if l := p.Lease(); l.Gen != 0 || !p.stale() {
		t.Errorf("lease %+v after a late beat; want none", l)
	}
}

// TestBeatsInFlightAreBounded: with every call hanging, at most
// maxInflightBeats run at once; later beats fail at once.
func TestBeatsInFlightAreBounded(t *testing.T) {
	r := startRedis(t)
	mock := mockclock.New()
	hook := newFaultHook()
	p := newTestPresence(t, r.client(t, hook), Config{Key: testKey(t), JobID: "a", Clock: mock})
	t.Cleanup(hook.unhang) // before Close (cleanups run last-in first-out)

	hook.hang.Store(true)
	for i := range maxInflightBeats {
		errc := make(chan error, 1)
		go func() { errc <- p.Beat(context.Background()) }()
		<-hook.entered
		mock.Add(DefaultBeat)
		if err := <-errc; !errors.Is(err, ErrBeatTimeout) {
			t.Fatalf("beat %d = %v, want ErrBeatTimeout", i, err)
		}
	}
	if err := p.Beat(context.Background()); !errors.Is(err, ErrBeatTimeout) {
		t.Fatalf("beat over the bound = %v, want ErrBeatTimeout at once", err)
	}
	if n := p.inflight.Load(); n != maxInflightBeats {
		t.Errorf("%d beats in flight, want %d", n, maxInflightBeats)
	}
}

// TestLapseReportedWhenRenewedFirst: after a pause (SIGSTOP), the beat and
// the deadline are due at once; when a late beat renews the lease before the
// fence goroutine looks, the old generation's lapse is still reported.
func TestLapseReportedWhenRenewedFirst(t *testing.T) {
	mock := mockclock.New()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mock.Set(t0)
	var lapses []uint64
	got := make(chan uint64, 4)
	p := newTestPresence(t, closedPortClient(t), Config{Key: testKey(t), JobID: "a", Clock: mock,
		OnLapse: func(gen uint64) { got <- gen }})
	p.Start()
	p.extend(t0, t0) // generation 1, until t0+7s
	if !p.Holds(1) {
		t.Fatal("generation 1 does not hold")
	}
	// The process was paused 20 s; the first thing it does is a beat that is
	// acknowledged in time, before the fence goroutine runs.
	resumed := t0.Add(20 * time.Second)
	if !p.extend(resumed, resumed) {
		t.Fatal("a beat after the lapse did not start a new generation")
	}
	lapses = append(lapses, <-got)
	if !slices.Equal(lapses, []uint64{1}) || p.Holds(1) || !p.Holds(2) {
		t.Errorf("OnLapse %v, Holds(1) %v, Holds(2) %v; want [1], false, true", lapses, p.Holds(1), p.Holds(2))
	}
}
