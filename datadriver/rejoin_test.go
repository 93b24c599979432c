package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// failReleases makes every release save of s fail before it is sent.
func failReleases(s *server) {
	s.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "release") {
			return testsupport.ErrInjected
		}
		return nil
	})
}

// leaveWithFailingSave joins key, earns coins, and leaves while release
// saves fail, so the profile is retained.
func leaveWithFailingSave(t *testing.T, s *server, d *datadriver.Driver[player], key string) *datadriver.Profile[player] {
	t.Helper()
	ctx := ctxT(t)
	p, err := d.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 777 })
	failReleases(s)
	if err := p.Release(ctx); !errors.Is(err, testsupport.ErrInjected) {
		t.Fatalf("Release with a failing backend = %v, want the injected error", err)
	}
	s.faults.Clear()
	select {
	case <-p.Done():
		t.Fatal("a profile whose release failed must be retained, not ended")
	default:
	}
	return p
}

func TestSameServerRejoinWaitsForLeaveSave(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:10")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 10 })

	// Hold the release save until the rejoin is waiting on it.
	inSave, proceed := holdFirst(a, func(cmd redis.Cmder) bool { return isWrite(cmd, "release") })
	released := make(chan error, 1)
	go func() { released <- p.Release(ctx) }()
	<-inSave

	joined := joinAsync(t, ctx, d, "user:10")
	select {
	case <-joined:
		t.Fatal("the rejoin loaded while the leave save was still running")
	case <-time.After(100 * time.Millisecond):
	}
	proceed()
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
	q := <-joined
	if q == nil {
		t.FailNow()
	}
	if q == p || coins(q) != 10 {
		t.Fatalf("rejoin got the old object %t or coins %d; want a fresh load of the saved record (10)", q == p, coins(q))
	}
}

func TestAdoption(t *testing.T) {
	t.Run("the save lands: the player continues on the same profile", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		a := newServer(t, r, "server-a")
		d := players(t, a)
		ctx := ctxT(t)
		p := leaveWithFailingSave(t, a, d, "user:11")
		oldEpoch := p.Epoch()
		q, err := d.Join(ctx, "user:11")
		if err != nil {
			t.Fatalf("rejoin: %v", err)
		}
		if q != p || coins(q) != 777 {
			t.Fatalf("rejoin got a new object (%t) or lost progress (coins %d)", q != p, coins(q))
		}
		if q.Epoch() != oldEpoch+1 {
			t.Fatalf("adoption epoch = %d, want %d (a new session)", q.Epoch(), oldEpoch+1)
		}
		if err := q.Update(func(d *player) { d.Coins++ }); err != nil {
			t.Fatalf("Update after adoption: %v", err)
		}
		if err := q.Release(ctx); err != nil {
			t.Fatalf("Release after adoption: %v", err)
		}
		if rec := recordFields(t, r, "PlayerData", "user:11"); rec["lock.token"] != "" || rec["ver"] != "2" {
			t.Fatalf("record after the adopted session left: %v", rec)
		}
	})

	t.Run("the lock is gone: the profile ends and the record loads", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		a := newServer(t, r, "server-a")
		b := newServer(t, r, "server-b")
		short := byAge(100*time.Millisecond, 50*time.Millisecond)
		da, db := players(t, a, short), players(t, b, short)
		ctx := ctxT(t)
		p := leaveWithFailingSave(t, a, da, "user:12")
		// A's writes keep failing, so its retained lock ages (a live server
		// refreshes its locks): server B takes the stale lock, plays and
		// leaves.
		a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
			if isWrite(cmd, "save") || isWrite(cmd, "release") {
				return testsupport.ErrInjected
			}
			return nil
		})
		pb, err := db.Join(ctx, "user:12")
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		_ = pb.Update(func(d *player) { d.Coins = 5 })
		if err := pb.Release(ctx); err != nil {
			t.Fatal(err)
		}
		a.faults.Clear()
		q, err := da.Join(ctx, "user:12")
		if err != nil {
			t.Fatalf("rejoin on A: %v", err)
		}
		if q == p || coins(q) != 5 {
			t.Fatalf("rejoin on A: same object %t, coins %d; want B's record (5) in a new profile", q == p, coins(q))
		}
		if !errors.Is(p.Err(), datadriver.ErrLockLost) {
			t.Fatalf("retained profile Err = %v, want ErrLockLost", p.Err())
		}
	})

	t.Run("writes still fail but the lock reads ours: the player keeps the retained profile", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		a := newServer(t, r, "server-a")
		d := players(t, a, func(c *datadriver.Config[player]) { c.Autosave = 50 * time.Millisecond })
		ctx := ctxT(t)
		p := leaveWithFailingSave(t, a, d, "user:13")
		a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
			if isWrite(cmd, "save") || isWrite(cmd, "release") {
				return testsupport.ErrInjected
			}
			return nil
		})
		q, err := d.Join(ctx, "user:13")
		if err != nil {
			t.Fatalf("rejoin while the backend is down: %v", err)
		}
		if q != p || coins(q) != 777 {
			t.Fatalf("rejoin got a new object (%t) or coins %d", q != p, coins(q))
		}
		if !strings.Contains(a.logs.String(), "the lock is ours and autosave writes the data") {
			t.Fatalf("no warning logged:\n%s", a.logs)
		}
		_ = q.Update(func(d *player) { d.Coins = 778 })
		a.faults.Clear()
		eventually(t, 5*time.Second, "an autosave lands after the backend recovers", func() bool {
			return recordFields(t, r, "PlayerData", "user:13")["ver"] == "1"
		})
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
		q2, err := d.Join(ctx, "user:13")
		if err != nil || coins(q2) != 778 {
			t.Fatalf("after recovery: %v, coins %d, want 778", err, coins(q2))
		}
	})

	// With Redis answering nothing, the rejoin cannot tell whether the
	// failed release landed (freeing the lock for anyone once Redis is back),
	// so it fails like any join would, and the profile stays retained.
	t.Run("Redis answers nothing: the rejoin fails, the profile stays retained", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		a := newServer(t, r, "server-a")
		d := players(t, a)
		ctx := ctxT(t)
		p := leaveWithFailingSave(t, a, d, "user:17")
		a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error { return testsupport.ErrInjected })
		if q, err := d.Join(ctx, "user:17"); err == nil {
			t.Fatalf("rejoin while Redis answers nothing = %v (same object %t), want an error", err, q == p)
		}
		select {
		case <-p.Done():
			t.Fatalf("the refused rejoin ended the retained profile: %v", p.Err())
		default:
		}
		a.faults.Clear()
		q, err := d.Join(ctx, "user:17")
		if err != nil || coins(q) != 777 {
			t.Fatalf("rejoin after Redis answers again: %v, coins %d, want 777", err, coins(q))
		}
	})
}

func TestLostReleaseResponse(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:14")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 31 })
	// The release lands, but its answer is lost.
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isWrite(cmd, "release") && err == nil {
			return testsupport.ErrInjected
		}
		return nil
	})
	if err := p.Release(ctx); !errors.Is(err, testsupport.ErrInjected) {
		t.Fatalf("Release = %v, want the injected lost answer", err)
	}
	a.faults.Clear()
	rec := recordFields(t, r, "PlayerData", "user:14")
	if rec["lock.token"] != "" || rec["released"] == "" || rec["released.ver"] != rec["ver"] {
		t.Fatalf("the release should have landed: %v", rec)
	}
	q, err := d.Join(ctx, "user:14")
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if q != p || coins(q) != 31 {
		t.Fatalf("rejoin: same object %t coins %d; want the retained profile retaken", q == p, coins(q))
	}
	rec = recordFields(t, r, "PlayerData", "user:14")
	if rec["lock.job"] != "server-a" || rec["lock.token"] == "" {
		t.Fatalf("the adoption did not retake the lock: %v", rec)
	}
	if err := q.Save(ctx); err != nil {
		t.Fatalf("Save after retake: %v", err)
	}
}

func TestJoinEndsLocalSession(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	var kicks atomic.Int32
	d := players(t, a, func(c *datadriver.Config[player]) {
		c.Kick = func(key string, reason datadriver.KickReason) {
			if reason == datadriver.ReasonJoinedElsewhere {
				kicks.Add(1)
			}
		}
	})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:15")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 3 })
	p.OnRelease(func(d *player) { d.Name = "cleaned" })

	if _, err := d.Load(ctx, "user:15", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrLocked) {
		t.Fatalf("a manual load without wait of a live local session = %v, want ErrLocked", err)
	}
	q, err := d.Join(ctx, "user:15")
	if err != nil {
		t.Fatalf("second Join: %v", err)
	}
	if kicks.Load() != 1 {
		t.Fatalf("Kick called %d times, want 1", kicks.Load())
	}
	if !errors.Is(p.Err(), datadriver.ErrReleased) {
		t.Fatalf("old session Err = %v, want ErrReleased", p.Err())
	}
	q.View(func(d *player) {
		if d.Coins != 3 || d.Name != "cleaned" {
			t.Fatalf("new session data %+v, want the old session's save with its cleanup", *d)
		}
	})
}

// A release whose answer was lost, then a rejoin whose adoption save fails:
// the lock is free (the release landed), so any server may take it, and
// the rejoin is refused rather than handed a profile that may run twice
// (found by the robustness suite under redis-restart-aof, seed 10). The
// next rejoin's save retakes the lock, and a clean leave writes the newer
// progress, not taking the earlier release for its own (simulation seed
// 3056).
func TestReleaseAfterUnlandedAdoptionWritesNewerProgress(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:16")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 1 })
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isWrite(cmd, "release") && err == nil {
			return testsupport.ErrInjected // landed, answer lost
		}
		return nil
	})
	if err := p.Release(ctx); err == nil {
		t.Fatal("the release's answer should be lost")
	}
	a.faults.Clear()
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") {
			return testsupport.ErrInjected // the adoption save does not land
		}
		return nil
	})
	if q, err := d.Join(ctx, "user:16"); err == nil {
		t.Fatalf("rejoin with the lock free and the adoption unlanded: nil error (same object %t), want a refusal", q == p)
	}
	a.faults.Clear()
	q, err := d.Join(ctx, "user:16")
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if err := q.Update(func(d *player) { d.Coins = 2 }); err != nil {
		t.Fatal(err)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := stored(t, r, "user:16"); got.Coins != 2 {
		t.Fatalf("stored coins %d after a clean leave, want 2: the leave dropped newer progress", got.Coins)
	}
}
