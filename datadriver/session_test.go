package datadriver_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

func TestSessionLifecycle(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)

	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	if got := coins(p); got != 100 {
		t.Fatalf("a new profile starts from Defaults: coins = %d, want 100", got)
	}
	if p.Epoch() != 1 {
		t.Fatalf("first acquisition: epoch = %d, want 1", p.Epoch())
	}
	if err := p.Update(func(d *player) { d.Coins += 50; d.Items["shield"] = 1 }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatalf("Save: %v", err)
	}
	rec := recordFields(t, r, "PlayerData", "user:1")
	if rec["lock.job"] != "server-a" || rec["lock.token"] == "" || rec["ver"] != "1" {
		t.Fatalf("after a save the record is locked by server-a at ver 1: %v", rec)
	}
	cleaned := false
	p.OnRelease(func(d *player) { d.Coins++; cleaned = true })
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !cleaned {
		t.Fatal("leave cleanup did not run")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done is not closed after Release")
	}
	if !errors.Is(p.Err(), datadriver.ErrReleased) {
		t.Fatalf("Err after Release = %v, want ErrReleased", p.Err())
	}
	if err := p.Update(func(d *player) { d.Coins = 0 }); !errors.Is(err, datadriver.ErrReleased) {
		t.Fatalf("Update after Release = %v, want ErrReleased", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatalf("a second Release = %v, want nil", err)
	}
	rec = recordFields(t, r, "PlayerData", "user:1")
	if rec["lock.token"] != "" {
		t.Fatalf("release left the lock set: %v", rec)
	}

	q, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatalf("second Join: %v", err)
	}
	q.View(func(d *player) {
		if d.Coins != 151 || d.Items["shield"] != 1 || d.Items["starter-sword"] != 1 {
			t.Fatalf("reloaded data = %+v, want coins 151 with shield and sword", *d)
		}
	})
	if q.Epoch() != 2 {
		t.Fatalf("second acquisition: epoch = %d, want 2", q.Epoch())
	}
}

func TestDecodeOverDefaults(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	ctx := ctxT(t)

	// An older build stored a profile without the Name field and with an
	// inventory that no longer has the starter sword.
	old := map[string]any{"Coins": 7, "Items": map[string]int{"bow": 1}}
	raw, err := msgpack.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Client(t)
	if err := c.HSet(ctx, r.Namespace+":{PlayerData:user:2}", "data", raw, "ver", 1, "fmt", 1).Err(); err != nil {
		t.Fatal(err)
	}
	d := players(t, a, func(c *datadriver.Config[player]) { c.Defaults.Name = "Newbie" })
	p, err := d.Load(ctx, "user:2", datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p.View(func(d *player) {
		if d.Coins != 7 || d.Name != "Newbie" {
			t.Fatalf("got %+v: stored fields kept, the new field takes its default", *d)
		}
		if _, ok := d.Items["starter-sword"]; ok || d.Items["bow"] != 1 {
			t.Fatalf("Items = %v: a stored map replaces the default's, it is not merged into it", d.Items)
		}
	})
}

func TestLockedElsewhere(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	b := newServer(t, r, "server-b")
	da, db := players(t, a), players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 300 * time.Millisecond })
	ctx := ctxT(t)

	if _, err := da.Join(ctx, "user:3"); err != nil {
		t.Fatal(err)
	}
	t.Run("manual load without wait answers ErrLocked at once", func(t *testing.T) {
		_, err := db.Load(ctx, "user:3", datadriver.LoadOptions{})
		var le *datadriver.LockedError
		if !errors.Is(err, datadriver.ErrLocked) || !errors.As(err, &le) {
			t.Fatalf("Load = %v, want a *LockedError", err)
		}
		if le.Holder != "server-a" || le.Key != "user:3" || le.Local {
			t.Fatalf("LockedError = %+v, want holder server-a", le)
		}
	})
	t.Run("join fails closed after LockWait", func(t *testing.T) {
		start := time.Now()
		_, err := db.Join(ctx, "user:3")
		if !errors.Is(err, datadriver.ErrWaitTimeout) || !errors.Is(err, datadriver.ErrLocked) {
			t.Fatalf("Join = %v, want ErrWaitTimeout wrapping the LockedError", err)
		}
		if waited := time.Since(start); waited < 300*time.Millisecond {
			t.Fatalf("Join gave up after %s, before LockWait", waited)
		}
		if rec := recordFields(t, r, "PlayerData", "user:3"); rec["lock.job"] != "server-a" {
			t.Fatalf("a failed join changed the lock: %v", rec)
		}
	})
	t.Run("a cancelled context answers ctx.Err", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := db.Load(cctx, "user:3", datadriver.LoadOptions{HandoffWait: time.Minute})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, datadriver.ErrLocked) {
			t.Fatalf("Load = %v, want context.DeadlineExceeded and no contention error", err)
		}
	})
}

func TestStaleLockWithoutPresenceTakenByAge(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	b := newServer(t, r, "server-b")
	short := byAge(200*time.Millisecond, 100*time.Millisecond)
	da, db := players(t, a, short), players(t, b, short)
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:4")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 1 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	// A's writes fail from now on, so its lock ages (a live server refreshes
	// the locks it holds). It carries no presence flag (no handoff): once
	// older than LockTTL+LockSkew it changes hands by age.
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") || isWrite(cmd, "release") {
			return testsupport.ErrInjected
		}
		return nil
	})
	pb, err := db.Join(ctx, "user:4")
	if err != nil {
		t.Fatalf("Join on a stale lock: %v", err)
	}
	// A ended the session itself before B could take the lock: LockTTL after
	// its last landed write, LockSkew before the lock could go by age.
	fencedAlready(t, pa, "A's session outlived its lock's age deadline: B took the lock of a live session")
	a.faults.Clear()
	if coins(pb) != 1 || pb.Epoch() != 2 {
		t.Fatalf("B got coins %d epoch %d, want A's last save (1) at epoch 2", coins(pb), pb.Epoch())
	}
	if !strings.Contains(b.logs.String(), "took a stale lock") {
		t.Fatalf("no warning about the stale lock in B's log:\n%s", b.logs)
	}

	// The fence: A's writes with its old token never land.
	_ = pa.Update(func(d *player) { d.Coins = 999 })
	if err := pa.Save(ctx); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("A's save after the takeover = %v, want ErrLockLost", err)
	}
	select {
	case <-pa.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("A's Done not closed after losing the lock")
	}
	if err := pa.Release(ctx); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("A's release after the takeover = %v, want ErrLockLost", err)
	}
	_ = pb.Update(func(d *player) { d.Coins = 2 })
	if err := pb.Save(ctx); err != nil {
		t.Fatalf("B's save: %v", err)
	}
	var stored player
	if err := msgpack.Unmarshal([]byte(recordFields(t, r, "PlayerData", "user:4")["data"]), &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Coins != 2 {
		t.Fatalf("stored coins = %d, want B's 2: a write with an old token landed", stored.Coins)
	}
}

// A lost lock is heard as Kick, then OnLockLost, however long the Kick
// takes (here it waits up to 100 ms for OnLockLost, which must not come
// meanwhile).
func TestLockLostSignals(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	kicked := make(chan datadriver.KickReason, 1)
	lost := make(chan error, 1)
	lostRan := make(chan struct{})
	var early atomic.Bool
	da := players(t, a, func(c *datadriver.Config[player]) {
		c.Kick = func(key string, reason datadriver.KickReason) {
			select {
			case <-lostRan:
				early.Store(true)
			case <-time.After(100 * time.Millisecond):
			}
			kicked <- reason
		}
		c.OnLockLost = func(key string, err error) { close(lostRan); lost <- err }
	})
	ctx := ctxT(t)
	p, err := da.Join(ctx, "user:5")
	if err != nil {
		t.Fatal(err)
	}
	// Another holder appears: overwrite the lock token in Redis.
	if err := r.Client(t).HSet(ctx, r.Namespace+":{PlayerData:user:5}", "lock.token", "someone-else", "lock.job", "server-z").Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(ctx); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("Save = %v, want ErrLockLost", err)
	}
	if reason := <-kicked; reason != datadriver.ReasonLockLost {
		t.Fatalf("kick reason %v", reason)
	}
	if err := <-lost; !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("OnLockLost got %v", err)
	}
	if early.Load() {
		t.Fatal("OnLockLost ran before Kick returned")
	}
	if !errors.Is(p.Err(), datadriver.ErrLockLost) {
		t.Fatalf("Err = %v", p.Err())
	}
}

func TestUserIDsAndMetaKept(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:6")
	if err != nil {
		t.Fatal(err)
	}
	p.SetUserIDs("42", "43")
	p.SetMeta("region", "eu")
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := d.Join(ctx, "user:6")
	if err != nil {
		t.Fatal(err)
	}
	if ids := q.UserIDs(); len(ids) != 2 || ids[0] != "42" || ids[1] != "43" {
		t.Fatalf("UserIDs = %v", ids)
	}
	if q.Meta()["region"] != "eu" {
		t.Fatalf("Meta = %v", q.Meta())
	}
}

func TestNodeCloseReleasesEverything(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	var ps []*datadriver.Profile[player]
	for _, k := range []string{"u1", "u2", "u3"} {
		p, err := d.Join(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 5 })
		p.OnRelease(func(d *player) { d.Name = "left" })
		ps = append(ps, p)
	}
	if err := a.node.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, p := range ps {
		select {
		case <-p.Done():
		default:
			t.Fatalf("%s still live after Close", p.Key())
		}
		rec := recordFields(t, r, "PlayerData", p.Key())
		var stored player
		_ = msgpack.Unmarshal([]byte(rec["data"]), &stored)
		if rec["lock.token"] != "" || stored.Coins != 5 || stored.Name != "left" {
			t.Fatalf("%s after Close: lock %q, data %+v; want released with coins 5 and the cleanup's name", p.Key(), rec["lock.token"], stored)
		}
	}
	if _, err := d.Join(ctx, "u4"); !errors.Is(err, datadriver.ErrClosed) {
		t.Fatalf("Join after Close = %v, want ErrClosed", err)
	}
}

func TestDuplicateDriver(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	players(t, a)
	_, err := datadriver.NewDriver(a.node, datadriver.Config[player]{Name: "PlayerData"})
	if !errors.Is(err, datadriver.ErrDuplicateDriver) {
		t.Fatalf("second driver with the same name: %v, want ErrDuplicateDriver", err)
	}
}

func TestCloseStopsEveryGoroutine(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	rdb, nc := r.Client(t), n.Connect(t)
	ctx := ctxT(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Count after the test's own connections are up, so only the Node's own
	// goroutines are measured.
	before := runtime.NumGoroutine()
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: "server-a", Redis: rdb, NATS: nc, Namespace: r.Namespace,
		Beat: 50 * time.Millisecond, PresenceTTL: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := datadriver.NewDriver(node, datadriver.Config[player]{Name: "PlayerData", Autosave: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"g1", "g2", "g3"} {
		if _, err := d.Join(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // beats and autosaves run
	if err := node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close has returned: what is left is at most the connection pool's own
	// goroutines settling; nothing may keep running.
	eventually(t, 5*time.Second, "the Node's goroutines end with Close", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestJoinAndLoadWaits(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SaveTimeout = time.Minute })
	d := players(t, a, func(c *datadriver.Config[player]) {
		c.LockWait = 10 * time.Second
		c.LocalHandoff = 300 * time.Millisecond
	})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	// The leave save stalls: a same-server load waits for it, up to its bound.
	inSave, proceed := holdFirst(a, func(cmd redis.Cmder) bool { return isWrite(cmd, "release") })
	defer proceed()
	go func() { _ = p.Release(ctx) }()
	<-inSave
	for _, tc := range []struct {
		name string
		load func() error
		min  time.Duration
		max  time.Duration
	}{
		{"Join waits LocalHandoff, not LockWait", func() error { _, err := d.Join(ctx, "w1"); return err }, 300 * time.Millisecond, 5 * time.Second},
		{"Load waits LocalHandoff when HandoffWait is unset", func() error {
			_, err := d.Load(ctx, "w1", datadriver.LoadOptions{})
			return err
		}, 300 * time.Millisecond, 5 * time.Second},
		{"Load waits HandoffWait", func() error {
			_, err := d.Load(ctx, "w1", datadriver.LoadOptions{HandoffWait: 600 * time.Millisecond})
			return err
		}, 600 * time.Millisecond, 5 * time.Second},
		{"Load with a negative HandoffWait does not wait", func() error {
			_, err := d.Load(ctx, "w1", datadriver.LoadOptions{HandoffWait: -1})
			return err
		}, 0, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := tc.load()
			took := time.Since(start)
			if !errors.Is(err, datadriver.ErrLocked) {
				t.Fatalf("load = %v, want a contention error", err)
			}
			if took < tc.min || took > tc.max {
				t.Fatalf("gave up after %s, want between %s and %s", took, tc.min, tc.max)
			}
		})
	}
}
