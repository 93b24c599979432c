package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

func TestBadInput(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a, func(c *datadriver.Config[player]) { c.MaxDataBytes = 256 })
	ctx := ctxT(t)
	c := r.Client(t)

	t.Run("invalid keys", func(t *testing.T) {
		for _, key := range []string{"", strings.Repeat("k", defaults.MaxKeyBytes+1), "user\n1", "user\x001", "bad\xffutf8"} {
			if _, err := d.Join(ctx, key); !errors.Is(err, datadriver.ErrInvalidKey) {
				t.Errorf("Join(%q) = %v, want ErrInvalidKey", key, err)
			}
		}
	})

	t.Run("corrupt record is refused and never overwritten", func(t *testing.T) {
		rk := r.Namespace + ":{PlayerData:corrupt}"
		garbage := "\xc1 not msgpack"
		if err := c.HSet(ctx, rk, "data", garbage, "ver", 3, "fmt", 1).Err(); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second load proves the first gave the lock back
			_, err := d.Load(ctx, "corrupt", datadriver.LoadOptions{})
			var ce *datadriver.CorruptRecordError
			if !errors.Is(err, datadriver.ErrCorruptRecord) || !errors.As(err, &ce) || ce.Key != "corrupt" {
				t.Fatalf("Load = %v, want a *CorruptRecordError", err)
			}
		}
		rec := recordFields(t, r, "PlayerData", "corrupt")
		if rec["data"] != garbage || rec["ver"] != "3" || rec["lock.token"] != "" {
			t.Fatalf("corrupt record changed: %q ver %s lock %q", rec["data"], rec["ver"], rec["lock.token"])
		}
	})

	t.Run("wrong field type is corrupt", func(t *testing.T) {
		raw, _ := msgpack.Marshal(map[string]any{"Coins": "lots"})
		if err := c.HSet(ctx, r.Namespace+":{PlayerData:wrongtype}", "data", raw, "ver", 1, "fmt", 1).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Load(ctx, "wrongtype", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrCorruptRecord) {
			t.Fatalf("Load = %v, want ErrCorruptRecord", err)
		}
	})

	t.Run("a newer record format is refused untouched", func(t *testing.T) {
		if err := c.HSet(ctx, r.Namespace+":{PlayerData:future}", "data", "x", "ver", 1, "fmt", 99).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Load(ctx, "future", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrSchemaTooNew) {
			t.Fatalf("Load = %v, want ErrSchemaTooNew", err)
		}
		if rec := recordFields(t, r, "PlayerData", "future"); rec["lock.token"] != "" || rec["epoch"] != "" {
			t.Fatalf("the acquire touched a record of an unknown format: %v", rec)
		}
	})

	t.Run("oversized data is refused before anything is written", func(t *testing.T) {
		p, err := d.Join(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 1 })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		before := recordFields(t, r, "PlayerData", "big")
		_ = p.Update(func(d *player) { d.Name = strings.Repeat("x", 300) })
		if err := p.Save(ctx); !errors.Is(err, datadriver.ErrTooLarge) {
			t.Fatalf("Save = %v, want ErrTooLarge", err)
		}
		after := recordFields(t, r, "PlayerData", "big")
		if after["data"] != before["data"] || after["ver"] != before["ver"] {
			t.Fatal("an oversized save changed the record")
		}
		if p.Err() != nil {
			t.Fatalf("an oversized save ended the session: %v", p.Err())
		}
	})
}

func TestAutosave(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SaveTimeout = time.Minute })
	d := players(t, a, func(c *datadriver.Config[player]) { c.Autosave = 40 * time.Millisecond })
	ctx := ctxT(t)

	// Saves of "stuck" hang until their context ends; count the others.
	var mu sync.Mutex
	landed := map[string]int{}
	stuckIn := make(chan struct{}, 100)
	a.faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") && strings.Contains(writeKey(cmd), "stuck") {
			stuckIn <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isWrite(cmd, "save") && err == nil {
			mu.Lock()
			landed[writeKey(cmd)]++
			mu.Unlock()
		}
		return nil
	})
	stuck, err := d.Join(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	var others []*datadriver.Profile[player]
	for i := range 5 {
		p, err := d.Join(ctx, fmt.Sprintf("player-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, p)
	}
	<-stuckIn // the stuck profile's autosave is hanging now
	eventually(t, 10*time.Second, "every other profile autosaves three times while one save is stuck", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range others {
			if landed[r.Namespace+":{PlayerData:"+p.Key()+"}"] < 3 {
				return false
			}
		}
		return true
	})
	if stuck.Err() != nil {
		t.Fatalf("the stuck profile ended: %v", stuck.Err())
	}
	// An autosave also refreshes the lock's age.
	at1 := recordFields(t, r, "PlayerData", "player-0")["lock.at"]
	eventually(t, 5*time.Second, "lock.at refreshed by autosave", func() bool {
		return recordFields(t, r, "PlayerData", "player-0")["lock.at"] != at1
	})
}

func TestVersionsAndRestore(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	const every = 10 * time.Millisecond
	d := players(t, a, func(c *datadriver.Config[player]) { c.History, c.HistoryEvery = 3, every })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:20")
	if err != nil {
		t.Fatal(err)
	}
	// Five saves with coins 1..5, each more than HistoryEvery after the last
	// (so each keeps the data it replaces); only 3 past versions are kept.
	for i := 1; i <= 5; i++ {
		_ = p.Update(func(d *player) { d.Coins = i })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(every + 5*time.Millisecond) // the history interval passes (Redis clock)
	}
	// A save of unchanged data writes no version.
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions(ctx, "user:20")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 4 || !vs[0].Current || vs[0].Ver != 5 || vs[3].Ver != 2 {
		t.Fatalf("Versions = %+v, want current 5 and past 4, 3, 2", vs)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	q, err := d.RestoreAt(ctx, "user:20", vs[2].At, datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt: %v", err)
	}
	if coins(q) != 3 {
		t.Fatalf("restored coins = %d, want 3", coins(q))
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	vs2, _ := d.Versions(ctx, "user:20")
	if vs2[0].Ver != 6 {
		t.Fatalf("the restore is a new version: got %+v", vs2[0])
	}
	if _, err := d.RestoreAt(ctx, "user:20", vs[3].At.Add(-time.Hour), datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrNoVersion) {
		t.Fatalf("RestoreAt before every kept version = %v, want ErrNoVersion", err)
	}
	if rec := recordFields(t, r, "PlayerData", "user:20"); rec["lock.token"] != "" || rec["ver"] != "6" {
		t.Fatalf("a failed restore left the record locked or changed: %v", rec)
	}
}

func TestWipe(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", withNATS(t, n))
	b := newServer(t, r, "server-b", withNATS(t, n))
	akicked := make(chan datadriver.KickReason, 1)
	kicked := make(chan datadriver.KickReason, 1)
	da := players(t, a, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, reason datadriver.KickReason) { akicked <- reason }
	})
	db := players(t, b, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, reason datadriver.KickReason) { kicked <- reason }
	})
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:30")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 9 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	// The erasure runs on server B while A holds the profile: A is asked to
	// release it first, so A's session has ended before anything is erased.
	if err := db.Wipe(ctx, "user:30"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(pa.Err(), datadriver.ErrReleased) && !errors.Is(pa.Err(), datadriver.ErrLockLost) {
		t.Fatalf("holder's session after a Wipe elsewhere: Err = %v, want it ended", pa.Err())
	}
	select {
	case <-pa.Done():
	default:
		t.Fatal("the holder's session still runs after the wipe returned")
	}
	if err := pa.Update(func(d *player) { d.Coins = 10 }); err == nil {
		t.Fatal("the holder took an Update after the wipe")
	}
	select {
	case reason := <-akicked:
		if reason != datadriver.ReasonWiped {
			t.Errorf("the holder's player was kicked with %v, want %v (the request said why)", reason, datadriver.ReasonWiped)
		}
	case <-time.After(5 * time.Second):
		t.Error("the holder's player was never kicked")
	}
	rk := record.Key(r.Namespace, "PlayerData", "user:30")
	if n, _ := r.Client(t).Exists(ctx, rk, rk+":hist", rk+":inbox").Result(); n != 0 {
		t.Fatalf("%d keys left after Wipe", n)
	}
	pb, err := db.Join(ctx, "user:30")
	if err != nil {
		t.Fatal(err)
	}
	var coins int
	pb.View(func(d *player) { coins = d.Coins })
	if coins != 100 {
		t.Fatalf("a join after the wipe got coins %d, want the Defaults' 100", coins)
	}
	if err := pb.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Wiping a key held on this Node ends the local session at once.
	pb, err = db.Join(ctx, "user:31")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Wipe(ctx, "user:31"); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(pb.Err(), datadriver.ErrLockLost) {
		t.Fatalf("local session after Wipe: Err = %v", pb.Err())
	}
	if reason := <-kicked; reason != datadriver.ReasonWiped {
		t.Errorf("the local session was kicked with %v, want %v", reason, datadriver.ReasonWiped)
	}
}

// TestWipeNeverFreesALiveHoldersLock: a wipe is a way a lock could change
// hands, so it obeys the rule: without an answer from the live holder (no
// NATS here) it waits out its LockWait and erases nothing, and the holder
// plays on and saves.
func TestWipeNeverFreesALiveHoldersLock(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	b := newServer(t, r, "server-b")
	da := players(t, a)
	db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 500 * time.Millisecond })
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:32")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 9 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	var locked *datadriver.LockedError
	if err := db.Wipe(ctx, "user:32"); !errors.As(err, &locked) || locked.Holder != "server-a" {
		t.Fatalf("Wipe of a live holder's profile = %v, want a *LockedError naming server-a", err)
	}
	if rec := recordFields(t, r, "PlayerData", "user:32"); rec["lock.job"] != "server-a" || rec["data"] == "" {
		t.Fatalf("a refused wipe changed the record: %v", rec)
	}
	_ = pa.Update(func(d *player) { d.Coins = 11 })
	if err := pa.Save(ctx); err != nil {
		t.Fatalf("the holder's save after a refused wipe = %v", err)
	}
}

func TestOneRoundTripPerOperation(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	counter := &testsupport.CommandCounter{}
	a.rdb.AddHook(counter)
	d := players(t, a)
	ctx := ctxT(t)
	// Warm the script cache so EVALSHA hits.
	warm, _ := d.Join(ctx, "warm")
	_ = warm.Update(func(d *player) { d.Coins = 1 })
	_ = warm.Save(ctx)
	_ = warm.Release(ctx)

	for _, step := range []struct {
		name string
		run  func(p **datadriver.Profile[player]) error
	}{
		{"acquire", func(p **datadriver.Profile[player]) (err error) { *p, err = d.Join(ctx, "rt"); return }},
		{"save", func(p **datadriver.Profile[player]) error {
			_ = (*p).Update(func(d *player) { d.Coins++ })
			return (*p).Save(ctx)
		}},
		{"save-and-release", func(p **datadriver.Profile[player]) error {
			_ = (*p).Update(func(d *player) { d.Coins++ })
			return (*p).Release(ctx)
		}},
	} {
		var p *datadriver.Profile[player]
		if step.name != "acquire" {
			p, _ = d.Join(ctx, "rt")
			// The first changed save of a record with data keeps a version
			// (then one per HistoryEvery): it reads the data it keeps
			// first, since the profile holds no copy of it. The steps below
			// come after it, as every save within the hour does.
			_ = p.Update(func(d *player) { d.Coins++ })
			_ = p.Save(ctx)
		}
		counter.Reset()
		if err := step.run(&p); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := counter.RoundTrips(); n != 1 {
			t.Errorf("%s took %d round trips (%v), want 1", step.name, n, counter.Commands())
		}
		if p != nil {
			_ = p.Release(ctx)
		}
	}
}

// Profiles loaded together do not save together: each has its own phase.
func TestAutosaveSpread(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	period := time.Second
	d := players(t, a, func(c *datadriver.Config[player]) { c.Autosave = period })
	var mu sync.Mutex
	first := map[string]time.Time{}
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isWrite(cmd, "save") && err == nil {
			mu.Lock()
			if _, ok := first[writeKey(cmd)]; !ok {
				first[writeKey(cmd)] = time.Now()
			}
			mu.Unlock()
		}
		return nil
	})
	ctx := ctxT(t)
	start := time.Now()
	for i := range 20 {
		if _, err := d.Join(ctx, fmt.Sprintf("spread-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "every profile autosaves once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(first) == 20
	})
	mu.Lock()
	defer mu.Unlock()
	var lo, hi time.Duration = period, 0
	for _, at := range first {
		lo, hi = min(lo, at.Sub(start)), max(hi, at.Sub(start))
	}
	if hi-lo < period/2 {
		t.Fatalf("the first autosaves of 20 profiles loaded together fall within %s of each other, want them spread over the %s period", hi-lo, period)
	}
}

// RestoreAt takes the key's lock with Load's waits: without a wait a key
// held elsewhere answers ErrLocked and nothing is restored.
func TestRestoreAtWaitsLikeLoad(t *testing.T) {
	r := testsupport.StartRedis(t)
	a, b := newServer(t, r, "server-a"), newServer(t, r, "server-b")
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	p, err := da.Join(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 1 })
	_ = p.Save(ctx)
	before := recordFields(t, r, "PlayerData", "r1")
	if _, err := db.RestoreAt(ctx, "r1", time.Now(), datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrLocked) {
		t.Fatalf("RestoreAt of a key held elsewhere = %v, want ErrLocked", err)
	}
	if after := recordFields(t, r, "PlayerData", "r1"); after["ver"] != before["ver"] || after["lock.token"] != before["lock.token"] {
		t.Fatal("a refused RestoreAt changed the record")
	}
}
