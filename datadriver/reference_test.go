package datadriver_test

// The reference design's nine multi-server cases, on virtual time with the
// reference timings (beat 3 s, presence TTL 10 s, request every 4 s, park
// 0.5 s doubling to 2 s, LockWait 15 s, LockTTL 180 s, LockSkew 60 s,
// autosave 30 s): several Nodes share one Redis (miniredis in the synctest
// bubble, running the real Lua scripts) and one in-process bus.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/internal/record"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// refDriver is the reference config on s: autosave on, defaults otherwise.
func refDriver(tb testing.TB, s *testsupport.Server, opts ...func(*datadriver.Config[player])) *datadriver.Driver[player] {
	tb.Helper()
	cfg := datadriver.Config[player]{Name: "PlayerData", Defaults: player{Coins: 100}}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := datadriver.NewDriver(s.Node, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// timed runs f and returns how much virtual time it took.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func TestReferenceCases(t *testing.T) {
	ctx := context.Background()

	t.Run("1 same-server rejoin while the leave save is failing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a := c.Start(nil)
			d := refDriver(t, a)
			p, err := d.Join(ctx, "user:1")
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Update(func(d *player) { d.Coins = 150 })
			a.Faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
				if isWrite(cmd, "release") || isWrite(cmd, "save") {
					return testsupport.ErrInjected
				}
				return nil
			})
			if err := p.Release(ctx); err == nil {
				t.Fatal("the leave save should fail")
			}
			var q *datadriver.Profile[player]
			took := timed(func() { q, err = d.Join(ctx, "user:1") })
			if err != nil || q != p || coins(q) != 150 {
				t.Fatalf("rejoin: %v, same object %t, coins %d; want the retained profile with its progress", err, q == p, coins(q))
			}
			if took != 0 {
				t.Fatalf("rejoin waited %s; the retained profile is adopted at once", took)
			}
			a.Faults.Clear()
			time.Sleep(31 * time.Second) // an autosave lands the adopted profile
			if got := storedIn(t, c, "user:1"); got.Coins != 150 {
				t.Fatalf("record coins %d after the backend came back", got.Coins)
			}
		})
	})

	t.Run("2 same-server rejoin after a leave save whose answer was lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a := c.Start(nil)
			d := refDriver(t, a)
			p, err := d.Join(ctx, "user:2")
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Update(func(d *player) { d.Coins = 222 })
			a.Faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
				if isWrite(cmd, "release") && err == nil {
					return testsupport.ErrInjected
				}
				return nil
			})
			if err := p.Release(ctx); err == nil {
				t.Fatal("the release's answer should be lost")
			}
			a.Faults.Clear()
			var q *datadriver.Profile[player]
			took := timed(func() { q, err = d.Join(ctx, "user:2") })
			if err != nil || q != p || coins(q) != 222 || took != 0 {
				t.Fatalf("rejoin: %v, same object %t, coins %d, after %s", err, q == p, coins(q), took)
			}
			if err := q.Save(ctx); err != nil {
				t.Fatalf("the retaken lock does not save: %v", err)
			}
		})
	})

	t.Run("3 a stale connection handed over in under 1.5 s with its latest data", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			da, db := refDriver(t, a), refDriver(t, b)
			pa, err := da.Join(ctx, "user:3")
			if err != nil {
				t.Fatal(err)
			}
			_ = pa.Update(func(d *player) { d.Coins = 333 }) // not saved
			// Every message takes 100 ms, as over a real network.
			c.Bus.SetFault(func(string, messaging.Message) testsupport.Fault {
				return testsupport.Fault{Delay: 100 * time.Millisecond}
			})
			var pb *datadriver.Profile[player]
			took := timed(func() { pb, err = db.Join(ctx, "user:3") })
			if err != nil || coins(pb) != 333 {
				t.Fatalf("B's join: %v, coins %d", err, coins(pb))
			}
			if took >= 1500*time.Millisecond {
				t.Fatalf("handed over in %s, want under 1.5 s", took)
			}
			t.Logf("handed over in %s (virtual, 100 ms per message)", took)
		})
	})

	t.Run("4 a late request must not end a newer session", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			var kicked sync.Map
			da := refDriver(t, a, func(cfg *datadriver.Config[player]) {
				cfg.Kick = func(key string, reason datadriver.KickReason) { kicked.Store(time.Now(), reason) }
			})
			db := refDriver(t, b)
			if _, err := da.Join(ctx, "user:4"); err != nil {
				t.Fatal(err)
			}
			// B's requests to A arrive, and arrive again 30 s later.
			c.Bus.SetFault(func(to string, m messaging.Message) testsupport.Fault {
				if m.Type == messaging.TypeRequest && to == a.JobID {
					return testsupport.Fault{Echo: 30 * time.Second}
				}
				return testsupport.Fault{}
			})
			if _, err := db.Join(ctx, "user:4"); err != nil {
				t.Fatal(err)
			}
			c.Bus.SetFault(nil)
			pa, err := da.Join(ctx, "user:4") // the player comes back to A
			if err != nil {
				t.Fatal(err)
			}
			joinedBack := time.Now()
			time.Sleep(time.Minute) // the late copy of B's request reaches A
			if pa.Err() != nil {
				t.Fatalf("the late request ended A's newer session: %v", pa.Err())
			}
			kicked.Range(func(k, v any) bool {
				if k.(time.Time).After(joinedBack) {
					t.Fatalf("A's newer session was kicked at %v (%v)", k, v)
				}
				return true
			})
			if got := c.Bus.Stats().Duplicated; got == 0 {
				t.Fatal("no late copy was delivered: the case did not happen")
			}
		})
	})

	t.Run("5 a crash taken over in under 16 s", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			noAutosave := func(cfg *datadriver.Config[player]) { cfg.Autosave = -1 }
			da, db := refDriver(t, a, noAutosave), refDriver(t, b)
			pa, err := da.Join(ctx, "user:5")
			if err != nil {
				t.Fatal(err)
			}
			_ = pa.Update(func(d *player) { d.Coins = 55 })
			if err := pa.Save(ctx); err != nil {
				t.Fatal(err)
			}
			_ = pa.Update(func(d *player) { d.Coins = 56 }) // lost with the crash
			time.Sleep(1700 * time.Millisecond)
			a.Crash()
			var pb *datadriver.Profile[player]
			took := timed(func() { pb, err = db.Join(ctx, "user:5") })
			if err != nil {
				t.Fatalf("B's join: %v after %s", err, took)
			}
			if coins(pb) != 55 {
				t.Fatalf("B got coins %d, want A's last landed save (55)", coins(pb))
			}
			if took >= 16*time.Second || took < 7*time.Second {
				t.Fatalf("taken over %s after the crash, want within [7 s, 16 s)", took)
			}
			t.Logf("crash taken over after %s (virtual)", took)
		})
	})

	t.Run("6 a crash mid-trade taken over in under 16 s, with the trade aborted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			crash := &testsupport.CrashHook{}
			a.Redis.AddHook(crash)
			da, db := refDriver(t, a), refDriver(t, b)
			s, err := da.Join(ctx, "seller")
			if err != nil {
				t.Fatal(err)
			}
			u, err := da.Join(ctx, "buyer")
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Update(func(d *player) { d.Coins, d.Items = 0, map[string]int{"sword": 1} })
			_ = u.Update(func(d *player) { d.Coins, d.Items = 100, map[string]int{} })
			for _, p := range []*datadriver.Profile[player]{s, u} {
				if err := p.Save(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// A trade of two other players first, so every script is cached
			// (a NOSCRIPT answer would count as a write that did not land).
			w1, _ := da.Join(ctx, "w1")
			w2, _ := da.Join(ctx, "w2")
			if err := datadriver.Trade(ctx, func(*datadriver.Tx) error { return nil }, w1, w2); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			crash.CrashAfter(3) // both marks and the journal entry land; the commit does not
			if err := datadriver.Trade(ctx, sellSword(s, u), s, u); err == nil {
				t.Fatal("the trade committed although the coordinator died before its commit")
			}
			crashed := time.Now()
			a.Crash()
			var ps [2]*datadriver.Profile[player]
			var wg sync.WaitGroup
			for i, k := range []string{"seller", "buyer"} {
				wg.Go(func() {
					p, err := db.Join(ctx, k)
					if err != nil {
						t.Errorf("take over %s: %v", k, err)
					}
					ps[i] = p
				})
			}
			wg.Wait()
			took := time.Since(crashed)
			if ps[0] == nil || ps[1] == nil {
				t.FailNow()
			}
			if took >= 16*time.Second {
				t.Fatalf("taken over %s after the crash, want under 16 s", took)
			}
			ps[0].View(func(d *player) {
				if d.Items["sword"] != 1 || d.Coins != 0 {
					t.Fatalf("seller %+v: want pre-trade (the trade aborted)", *d)
				}
			})
			ps[1].View(func(d *player) {
				if d.Items["sword"] != 0 || d.Coins != 100 {
					t.Fatalf("buyer %+v: want pre-trade", *d)
				}
			})
			if !strings.Contains(b.Logs.String(), "recovered an aborted trade") {
				t.Fatalf("no recovery in B's log:\n%s", b.Logs)
			}
			t.Logf("participants of the crashed trade taken over after %s (virtual)", took)
		})
	})

	t.Run("7 a stalling live holder keeps its lock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			short := func(cfg *datadriver.Config[player]) { cfg.LockTTL, cfg.LockSkew = 5*time.Second, time.Second }
			da, db := refDriver(t, a, short), refDriver(t, b, short)
			if _, err := da.Join(ctx, "user:7"); err != nil {
				t.Fatal(err)
			}
			a.Faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
				if isWrite(cmd, "save") || isWrite(cmd, "release") {
					<-ctx.Done() // the save stalls until its timeout
					return ctx.Err()
				}
				return nil
			})
			time.Sleep(10 * time.Second) // the lock is past LockTTL+LockSkew by age
			var err error
			took := timed(func() { _, err = db.Join(ctx, "user:7") })
			if !errors.Is(err, datadriver.ErrWaitTimeout) {
				t.Fatalf("B's join = %v, want ErrWaitTimeout", err)
			}
			if took < 15*time.Second || took > 15*time.Second+10*time.Millisecond {
				t.Fatalf("B was refused after %s, want LockWait (15 s)", took)
			}
			if rec := recordOf(t, c, "user:7"); rec["lock.job"] != a.JobID {
				t.Fatalf("the live holder lost its lock: %v", rec)
			}
		})
	})

	t.Run("8 a holder without presence is never taken early", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a, b := c.Start(nil), c.Start(nil)
			da := refDriver(t, a, datadriver.WithoutHandoff[player])
			db := refDriver(t, b)
			pa, err := da.Join(ctx, "user:8")
			if err != nil {
				t.Fatal(err)
			}
			_ = pa.Update(func(d *player) { d.Coins = 88 })
			if err := pa.Save(ctx); err != nil {
				t.Fatal(err)
			}
			saved := time.Now()
			a.Crash()
			// Until the lock is LockTTL + LockSkew (240 s) old, every join fails.
			for time.Since(saved) < 225*time.Second {
				if _, err := db.Join(ctx, "user:8"); !errors.Is(err, datadriver.ErrWaitTimeout) {
					t.Fatalf("join %s after the last save = %v, want ErrWaitTimeout", time.Since(saved), err)
				}
			}
			var pb *datadriver.Profile[player]
			for pb == nil {
				pb, err = db.Join(ctx, "user:8")
				if err != nil && !errors.Is(err, datadriver.ErrWaitTimeout) {
					t.Fatal(err)
				}
			}
			if age := time.Since(saved); age < 240*time.Second || age > 256*time.Second {
				t.Fatalf("taken at lock age %s, want just past 240 s", age)
			}
			if coins(pb) != 88 {
				t.Fatalf("coins %d", coins(pb))
			}
		})
	})

	t.Run("9 one stuck autosave does not block the others", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := testsupport.NewCluster(t)
			a := c.Start(nil)
			d := refDriver(t, a)
			var mu sync.Mutex
			landed := map[string]int{}
			c.Observe(func(_ string, call testsupport.ScriptCall) {
				if a, err := record.ParseSaveArgs(call.Args); call.Script == record.ScriptSave && err == nil &&
					a.Mode == record.ModeSave && call.Err == nil {
					mu.Lock()
					landed[call.Keys[0]]++
					mu.Unlock()
				}
			})
			a.Faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
				if k, _ := testsupport.ScriptKey(cmd, 1); isWrite(cmd, "save") && strings.Contains(k, "stuck") {
					<-ctx.Done() // never answers; the save's own timeout gives up
					return ctx.Err()
				}
				return nil
			})
			keys := []string{"stuck", "p1", "p2", "p3", "p4", "p5"}
			for _, k := range keys {
				p, err := d.Join(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				_ = p.Update(func(d *player) { d.Coins = 1 })
			}
			time.Sleep(5 * time.Minute)
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys[1:] {
				if n := landed["sim:{PlayerData:"+k+"}"]; n < 9 {
					t.Fatalf("%s autosaved %d times in 5 min while another save was stuck, want 9 or more", k, n)
				}
			}
		})
	})
}

// recordOf reads key's record fields from the cluster's Redis.
func recordOf(tb testing.TB, c *testsupport.Cluster, key string) map[string]string {
	tb.Helper()
	rdb := c.Client(tb)
	defer rdb.Close()
	m, err := rdb.HGetAll(context.Background(), record.Key("sim", "PlayerData", key)).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// storedIn decodes key's stored data from the cluster's Redis.
func storedIn(tb testing.TB, c *testsupport.Cluster, key string) player {
	tb.Helper()
	var p player
	if raw := recordOf(tb, c, key)["data"]; raw != "" {
		if err := msgpack.Unmarshal([]byte(raw), &p); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}
