package datadriver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/testsupport"
)

// loadsOf reads every live server's session count through a reader of the
// pair's presence hash.
func loadsOf(t *testing.T, pres *presencecore.Presence) map[string]int {
	t.Helper()
	loads, err := pres.Loads(context.Background())
	if err != nil {
		t.Fatalf("Loads: %v", err)
	}
	got := make(map[string]int, len(loads))
	for _, l := range loads {
		got[l.JobID] = l.Sessions
	}
	return got
}

// TestSessionsInPresence: each Node's session count travels with its beat.
// Two Nodes with 3 and 5 players read 3 and 5 to any reader; a release
// shows within a beat; a Node whose beats stop is not shown as live, with
// no count.
func TestSessionsInPresence(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := players(t, pr.a), players(t, pr.b)
	var held []*datadriver.Profile[player]
	for i := range 3 {
		p, err := da.Join(ctx, fmt.Sprintf("a-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	for i := range 5 {
		if _, err := db.Join(ctx, fmt.Sprintf("b-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := pr.a.node.Sessions(); n != 3 {
		t.Fatalf("server-a Sessions() = %d, want 3", n)
	}
	reader, err := presencecore.New(pr.r.Client(t), presencecore.Config{Key: presencecore.KeyFor(pr.r.Namespace), JobID: "reader",
		Beat: fastBeat, TTL: fastTTL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "server-a 3 and server-b 5 in presence", func() bool {
		got := loadsOf(t, reader)
		return got["server-a"] == 3 && got["server-b"] == 5 && len(got) == 2
	})

	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	// The next beat carries the count: one Beat, and one more for a beat
	// already in flight when the release landed, plus the read.
	eventually(t, 2*fastBeat+200*time.Millisecond, "server-a's count to fall to 2", func() bool {
		return loadsOf(t, reader)["server-a"] == 2
	})
	t.Logf("count read %v after the release (beat %v)", time.Since(released).Round(time.Millisecond), fastBeat)

	// server-b's beats stop (its presence calls fail): once its beat has
	// expired it is not live, and its count is given by neither reader.
	pr.b.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error { return testsupport.ErrInjected })
	eventually(t, fastTTL+2*time.Second, "server-b not live", func() bool {
		_, ok := loadsOf(t, reader)["server-b"]
		return !ok
	})
	entries, err := reader.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case e.JobID == "server-b" && (e.Status == presencecore.Alive || !e.SessionsAt.IsZero() || e.Sessions != 0):
			t.Errorf("dead server-b's entry %+v carries a count", e)
		case e.JobID == "server-a" && (e.Status != presencecore.Alive || e.Sessions != 2):
			t.Errorf("server-a's entry %+v, want alive with 2", e)
		}
	}
	pr.b.faults.Clear()
}
