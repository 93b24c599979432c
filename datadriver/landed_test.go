package datadriver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// savedLog collects what OnSaved was told.
type savedLog struct {
	mu   sync.Mutex
	seen []datadriver.Saved
}

func (l *savedLog) on(_ string, s datadriver.Saved) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, s)
}

func (l *savedLog) all() []datadriver.Saved {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]datadriver.Saved(nil), l.seen...)
}

// awaitSaved waits until OnSaved was called n times (it runs on the
// driver's callback goroutine, after the write returned).
func (l *savedLog) awaitSaved(tb testing.TB, n int) []datadriver.Saved {
	tb.Helper()
	eventually(tb, 5*time.Second, "OnSaved calls", func() bool { return len(l.all()) >= n })
	return l.all()
}

// TestOnSavedSeesEachLandedVersion: Save, a save of unchanged data and the
// release each call OnSaved once, in order, with the version and time the
// record stores and the Updates it includes; LastSaved says the same by the
// time the write returns.
func TestOnSavedSeesEachLandedVersion(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	var log savedLog
	d := players(t, s, func(c *datadriver.Config[player]) { c.OnSaved = log.on })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.LastSaved(); got != (datadriver.Saved{}) {
		t.Fatalf("LastSaved before any write = %+v, want zero", got)
	}
	start := time.Now()
	var want []datadriver.Saved
	for i := 1; i <= 3; i++ {
		_ = p.Update(func(d *player) { d.Coins = i })
		n := p.Updates()
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		got := p.LastSaved()
		if got.Ver != int64(i) || got.Updates != n || uint64(i) != n || !got.Replicated || got.Released ||
			got.At.Before(start.Add(-time.Second)) || got.At.After(time.Now().Add(time.Second)) {
			t.Fatalf("LastSaved after save %d = %+v; want ver %d, %d updates, replicated, a time of now", i, got, i, n)
		}
		if f := recordFields(t, r, "PlayerData", "user:1"); f["ver"] != strconv.FormatInt(got.Ver, 10) {
			t.Fatalf("the record's ver %q disagrees with LastSaved %+v", f["ver"], got)
		}
		want = append(want, got)
	}
	if err := p.Save(ctx); err != nil { // nothing changed: the same version, stored again
		t.Fatal(err)
	}
	want = append(want, want[2])
	_ = p.Update(func(d *player) { d.Coins = 10 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, datadriver.Saved{Key: "user:1", Ver: 4, Updates: 4, Replicated: true, Released: true})
	got := log.awaitSaved(t, len(want))
	if len(got) != len(want) {
		t.Fatalf("OnSaved was called %d times, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		w := want[i]
		if i == len(want)-1 {
			w.At = got[i].At // the release's time is the script's
		}
		if got[i] != w || got[i].Key != "user:1" || (i > 0 && got[i].At.Before(got[i-1].At)) {
			t.Fatalf("OnSaved call %d = %+v, want %+v (all: %+v)", i+1, got[i], w, got)
		}
	}
}

// TestOnSavedNotForARefusedWrite: a save refused (too large) or failed
// (Redis refused the call) calls no OnSaved and leaves LastSaved as it was.
func TestOnSavedNotForARefusedWrite(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	var log savedLog
	d := players(t, s, func(c *datadriver.Config[player]) { c.OnSaved = log.on; c.MaxDataBytes = 200 })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 1 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	first := log.awaitSaved(t, 1)[0]
	_ = p.Update(func(d *player) { d.Name = strings.Repeat("x", 300) })
	if err := p.Save(ctx); !errors.Is(err, datadriver.ErrTooLarge) {
		t.Fatalf("Save over MaxDataBytes = %v, want ErrTooLarge", err)
	}
	_ = p.Update(func(d *player) { d.Name = "ok" })
	s.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") {
			return testsupport.ErrInjected
		}
		return nil
	})
	if err := p.Save(ctx); err == nil {
		t.Fatal("Save with the write failing = nil, want an error")
	}
	s.faults.Clear()
	if got := p.LastSaved(); got != first {
		t.Fatalf("LastSaved after refused writes = %+v, want the first save's %+v", got, first)
	}
	_ = p.Update(func(d *player) { d.Coins = 2 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	got := log.awaitSaved(t, 2)
	if len(got) != 2 || got[1].Ver != first.Ver+1 || got[1].Updates != p.Updates() {
		t.Fatalf("OnSaved calls = %+v; want the first save, then only the next landed one (ver %d)", got, first.Ver+1)
	}
}

// TestOnSavedPanicIsContained: an OnSaved that panics is recovered and
// logged; the write stands, the session goes on, the next write calls it
// again.
func TestOnSavedPanicIsContained(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	var log savedLog
	d := players(t, s, func(c *datadriver.Config[player]) {
		c.OnSaved = func(key string, sv datadriver.Saved) {
			log.on(key, sv)
			panic("the game's hook broke")
		}
	})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		_ = p.Update(func(d *player) { d.Coins = i })
		if err := p.Save(ctx); err != nil {
			t.Fatalf("save %d with a panicking OnSaved: %v", i, err)
		}
	}
	if got := log.awaitSaved(t, 2); got[1].Ver != 2 {
		t.Fatalf("OnSaved calls = %+v, want two, the second at ver 2", got)
	}
	eventually(t, 5*time.Second, "the panic logged", func() bool {
		return strings.Contains(s.logs.String(), "game callback panicked") && strings.Contains(s.logs.String(), "OnSaved")
	})
	if err := p.Update(func(d *player) { d.Coins = 3 }); err != nil {
		t.Fatalf("the session after a panicking OnSaved: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOnSavedSaysNotReplicated: with MinReplicas, a save the replica
// acknowledged is Replicated; one it did not (ErrNotReplicated) lands and
// says so.
func TestOnSavedSaysNotReplicated(t *testing.T) {
	rr := testsupport.StartRedisReplicated(t, 1)
	n := replicatedNode(t, rr, "server-a")
	var log savedLog
	d, err := datadriver.NewDriver(n, datadriver.Config[bag]{Name: "PlayerData", Autosave: -1, OnSaved: log.on})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(b *bag) { b.Coins = 1 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	rr.PauseReplica(t, 0)
	_ = p.Update(func(b *bag) { b.Coins = 2 })
	if err := p.Save(ctx); !errors.Is(err, datadriver.ErrNotReplicated) {
		t.Fatalf("Save with the replica paused = %v, want ErrNotReplicated", err)
	}
	rr.ResumeReplica(t, 0)
	got := log.awaitSaved(t, 2)
	if !got[0].Replicated || got[0].Ver != 1 || got[1].Replicated || got[1].Ver != 2 || p.LastSaved() != got[1] {
		t.Fatalf("OnSaved = %+v, LastSaved %+v; want ver 1 replicated, then ver 2 landed but not replicated", got,
			p.LastSaved())
	}
	_ = p.Release(ctx)
}

// TestOnSavedAfterATrade: a trade's settle is a landed write of each
// profile: OnSaved hears it at the new version, counting no Update the
// trade did not store.
func TestOnSavedAfterATrade(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	var log savedLog
	d := players(t, s, func(c *datadriver.Config[player]) { c.OnSaved = log.on })
	ctx := ctxT(t)
	seller, buyer := tradePair(t, d, "ts-seller", "ts-buyer") // one save each: ver 1
	before := log.awaitSaved(t, 2)
	if err := datadriver.Trade(ctx, sellSword(seller, buyer), seller, buyer); err != nil {
		t.Fatal(err)
	}
	got := log.awaitSaved(t, 4)[2:]
	for _, p := range []*datadriver.Profile[player]{seller, buyer} {
		var sv *datadriver.Saved
		for i := range got {
			if got[i].Key == p.Key() {
				sv = &got[i]
			}
		}
		if sv == nil || sv.Ver != 2 || sv.Updates != 1 || !sv.Replicated || sv.Released || p.LastSaved() != *sv {
			t.Fatalf("OnSaved after the trade for %s = %+v (before %+v), LastSaved %+v; want ver 2, the 1 Update of "+
				"its first save", p.Key(), got, before, p.LastSaved())
		}
		if f := recordFields(t, r, "PlayerData", p.Key()); f["ver"] != "2" {
			t.Fatalf("%s's record is at ver %q, want 2", p.Key(), f["ver"])
		}
	}
}
