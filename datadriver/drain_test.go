package datadriver_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// TestDrainMovesEveryProfileByLoad: server-a drains 20 players to two
// peers, server-b already holding 6 and server-c none: the players go to
// the least loaded, so that both end near 13, each move reported with its
// target, and every moved profile is joined there with its data and no
// acquire.
func TestDrainMovesEveryProfileByLoad(t *testing.T) {
	mp := newMovePair(t)
	c := newServer(t, mp.r, "server-c", fast, withNATS(t, mp.n))
	dc := players(t, c)
	ctx := ctxT(t)
	for i := range 20 {
		joinWith(t, mp.da, fmt.Sprintf("a-%d", i), 100+i)
	}
	for i := range 6 {
		if _, err := mp.db.Join(ctx, fmt.Sprintf("b-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := presencecore.New(mp.r.Client(t), presencecore.Config{Key: presencecore.KeyFor(mp.r.Namespace), JobID: "reader",
		Beat: fastBeat, TTL: fastTTL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the three counts in presence", func() bool {
		got := loadsOf(t, reader)
		return got["server-a"] == 20 && got["server-b"] == 6 && got["server-c"] == 0
	})
	var mu sync.Mutex
	went := map[string]string{}
	res, err := mp.a.node.Drain(ctx, datadriver.DrainOptions{OnMoved: func(driver, key, to string) {
		mu.Lock()
		defer mu.Unlock()
		went[key] = to
	}})
	if err != nil || res.Failed != 0 {
		t.Fatalf("Drain: %+v, %v", res, err)
	}
	if res.Moved["server-b"] != 7 || res.Moved["server-c"] != 13 || len(went) != 20 {
		t.Fatalf("drain moved %v (reported %d), want 7 to server-b and 13 to server-c (13 each after)", res.Moved, len(went))
	}
	if n := mp.a.node.Sessions(); n != 0 {
		t.Fatalf("server-a holds %d sessions after the drain", n)
	}
	drivers := map[string]*datadriver.Driver[player]{"server-b": mp.db, "server-c": dc}
	for i := range 20 {
		key := fmt.Sprintf("a-%d", i)
		d := drivers[went[key]]
		eventually(t, 5*time.Second, key+" held on its target", func() bool { return d.MoveHeld(key) })
		q, err := d.Join(ctx, key)
		if err != nil || coins(q) != 100+i {
			t.Fatalf("join of %s on %s after the drain: %v", key, went[key], err)
		}
	}
}

// TestConcurrentDrainsDoNotPileOnOnePeer: server-a and server-d drain 10
// players each at once to server-b (0 players) and server-c (10). By the
// counts alone each would send all 10 to server-b (20 against 10); their
// headroom reservations (drainhold.lua) make the second see the first's
// hold, so the two peers end even (within 3), and no profile goes to a
// Node that is draining.
func TestConcurrentDrainsDoNotPileOnOnePeer(t *testing.T) {
	mp := newMovePair(t)
	c := newServer(t, mp.r, "server-c", fast, withNATS(t, mp.n))
	d := newServer(t, mp.r, "server-d", fast, withNATS(t, mp.n))
	dc, dd := players(t, c), players(t, d)
	ctx := ctxT(t)
	for i := range 10 {
		joinWith(t, mp.da, fmt.Sprintf("a-%d", i), i)
		joinWith(t, dd, fmt.Sprintf("d-%d", i), i)
		if _, err := dc.Join(ctx, fmt.Sprintf("c-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := presencecore.New(mp.r.Client(t), presencecore.Config{Key: presencecore.KeyFor(mp.r.Namespace), JobID: "reader",
		Beat: fastBeat, TTL: fastTTL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the four counts in presence", func() bool {
		got := loadsOf(t, reader)
		return got["server-a"] == 10 && got["server-b"] == 0 && got["server-c"] == 10 && got["server-d"] == 10
	})
	var wg sync.WaitGroup
	results := make([]datadriver.DrainResult, 2)
	for i, s := range []*server{mp.a, d} {
		wg.Go(func() {
			res, err := s.node.Drain(ctx, datadriver.DrainOptions{})
			if err != nil || res.Failed != 0 {
				t.Errorf("Drain of %s: %+v, %v", s.node.JobID(), res, err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	b, cc := 0, 10
	for _, r := range results {
		b, cc = b+r.Moved["server-b"], cc+r.Moved["server-c"]
		if r.Moved["server-a"]+r.Moved["server-d"] != 0 {
			t.Fatalf("a drain moved profiles to a draining Node: %v", r.Moved)
		}
	}
	if b+cc != 30 || b-cc > 3 || cc-b > 3 {
		t.Fatalf("after two concurrent drains server-b holds %d and server-c %d (drains %v, %v): they piled up",
			b, cc, results[0].Moved, results[1].Moved)
	}
}
