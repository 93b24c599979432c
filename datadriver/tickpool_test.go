package datadriver_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// idleRefreshing is a driver config whose sessions refresh their locks
// LockTTL/2 after their last write (3 s) and never autosave.
func idleRefreshing(c *datadriver.Config[player]) { c.LockTTL, c.Autosave = 6*time.Second, -1 }

// TestABurstOfTicksRunsOnAtMostMaxConcurrentSavesGoroutines: forty
// sessions whose lock refreshes come due together on a slow Redis (each
// save.lua call takes 100 ms) are refreshed by at most MaxConcurrentSaves
// goroutines at once, where each started a goroutine of its own before
// (about forty at once here); every session lives on.
func TestABurstOfTicksRunsOnAtMostMaxConcurrentSavesGoroutines(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.MaxConcurrentSaves = 4 })
	d := players(t, a, idleRefreshing)
	ctx := ctxT(t)
	const n = 40
	held := make([]*datadriver.Profile[player], n)
	for i := range held {
		p, err := d.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held[i] = p
	}
	time.Sleep(300 * time.Millisecond) // the joins' own work is done
	base := runtime.NumGoroutine()
	var refreshed atomic.Int32
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptSave) {
			time.Sleep(100 * time.Millisecond)
			refreshed.Add(1)
		}
		return nil
	})
	peak := 0
	deadline := time.Now().Add(15 * time.Second)
	for refreshed.Load() < n && time.Now().Before(deadline) {
		peak = max(peak, runtime.NumGoroutine()-base)
		time.Sleep(time.Millisecond)
	}
	a.faults.Clear()
	if got := refreshed.Load(); got < n {
		t.Fatalf("%d of %d sessions refreshed their locks", got, n)
	}
	// Four workers, and a margin for the timers' and the beats' own (46 before).
	if peak > 4+12 {
		t.Fatalf("the refreshes ran on %d more goroutines at their peak; want at most MaxConcurrentSaves (4) and a "+
			"margin of 12", peak)
	}
	for _, p := range held {
		if err := p.Err(); err != nil {
			t.Fatalf("%s ended: %v", p.Key(), err)
		}
	}
	t.Logf("peak: %d goroutines above the %d before the refreshes", peak, base)
}

// TestARequestDoesNotWaitForQueuedTicks: with every tick worker stuck in a
// refresh that hangs, a session whose own tick waits in the queue saves at
// once when the game asks: a request starts a drain of its own, which runs
// the queued tick too.
func TestARequestDoesNotWaitForQueuedTicks(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.MaxConcurrentSaves = 2 })
	d := players(t, a, idleRefreshing)
	ctx := ctxT(t)
	release := make(chan struct{})
	defer close(release)
	var hung atomic.Int32
	a.faults.SetBefore(func(c context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptSave) && strings.Contains(writeKey(cmd), ":stuck") {
			hung.Add(1)
			select {
			case <-release:
			case <-c.Done():
			}
			return testsupport.ErrInjected
		}
		return nil
	})
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, err := d.Join(ctx, "user:"+k+":stuck"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := d.Join(ctx, "user:free")
	if err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	eventually(t, 10*time.Second, "both tick workers stuck", func() bool { return hung.Load() >= 2 })
	time.Sleep(time.Until(joined.Add(3*time.Second + 200*time.Millisecond))) // user:free's tick is queued
	if hung.Load() != 2 {
		t.Fatalf("%d refreshes hang; want the two tick workers' only", hung.Load())
	}
	_ = p.Update(func(pl *player) { pl.Coins = 7 })
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Save(sctx); err != nil {
		t.Fatalf("Save while the tick workers are stuck: %v (after %s)", err, time.Since(start))
	}
	if p.LastSaved().Updates != p.Updates() {
		t.Fatal("the save did not land")
	}
}
