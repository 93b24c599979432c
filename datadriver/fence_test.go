package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

func TestSelfFenceWhenBeatsFail(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", fast, withNATS(t, n))
	var ka kicks
	da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	ctx := ctxT(t)
	p, err := da.Join(ctx, "user:9")
	if err != nil {
		t.Fatal(err)
	}
	// Presence writes fail while everything else works.
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if k, ok := testsupport.ScriptKey(cmd, 1); ok && strings.HasSuffix(k, "CKPresence") {
			return testsupport.ErrInjected
		}
		return nil
	})
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session outlived this server's presence")
	}
	if !errors.Is(p.Err(), datadriver.ErrLockLost) || !errors.Is(p.Err(), datadriver.ErrFenced) {
		t.Fatalf("Err = %v, want ErrLockLost and ErrFenced", p.Err())
	}
	// The game is told the server lost its store, not that the player went
	// elsewhere.
	eventually(t, 5*time.Second, "the player is kicked", func() bool { return ka.fenced.Load() == 1 })
	if n, m := ka.lost.Load(), ka.joined.Load(); n != 0 || m != 0 {
		t.Errorf("kicks: %d lock-lost, %d joined-elsewhere; want only the fenced one", n, m)
	}
	if err := p.Update(func(d *player) { d.Coins++ }); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("Update after the fence = %v, want ErrLockLost", err)
	}
	// The fenced session's lock is given back (without its unsaved
	// progress), so the player is not locked out by a live server that no
	// longer holds the session.
	eventually(t, 5*time.Second, "the fenced lock is given back", func() bool {
		return recordFields(t, r, "PlayerData", "user:9")["lock.token"] == ""
	})
}

func TestCleanCloseRemovesPresence(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", fast, withNATS(t, n))
	players(t, a)
	ctx := ctxT(t)
	c := r.Client(t)
	eventually(t, 5*time.Second, "A beats presence", func() bool {
		ok, _ := c.HExists(ctx, r.Namespace+":CKPresence", "server-a").Result()
		return ok
	})
	if err := a.node.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.HExists(ctx, r.Namespace+":CKPresence", "server-a").Result(); ok {
		t.Fatal("a clean Close left this server's presence field")
	}
}

// A rejoin on A adopts A's retained profile, but the adoption save's answer
// is lost while B holds the lock: A must not go on with its stale copy; it
// loads the record through a handoff from B (found by simulation seed 5304).
func TestAdoptionWithLostAnswerWhileHeldElsewhere(t *testing.T) {
	pr := newPair(t)
	r, a, b := pr.r, pr.a, pr.b
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:10")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 3 })
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if (isWrite(cmd, "release") || isWrite(cmd, "save")) && err == nil {
			return testsupport.ErrInjected // every answer of A's writes is lost
		}
		return nil
	})
	if err := pa.Release(ctx); err == nil {
		t.Fatal("the release's answer should be lost")
	}
	pb, err := db.Join(ctx, "user:10") // the release landed: B takes the free lock
	if err != nil {
		t.Fatal(err)
	}
	_ = pb.Update(func(d *player) { d.Coins = 5 })
	q, err := da.Join(ctx, "user:10")
	if err != nil {
		t.Fatalf("rejoin on A: %v", err)
	}
	a.faults.Clear()
	if q == pa {
		t.Fatal("A went on with its retained copy while B held the lock")
	}
	if coins(q) != 5 {
		t.Fatalf("A loaded coins %d, want B's 5 (handed over)", coins(q))
	}
	if got := stored(t, r, "user:10"); got.Coins != 5 {
		t.Fatalf("stored coins %d", got.Coins)
	}
}

// A save that was in flight when a fenced session's lock was given back
// lands after the release: it must not take the lock again, or a live server
// would hold a lock no session uses (found by simulation seed 7131).
func TestLateSaveAfterGiveBack(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", fast)
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:11")
	if err != nil {
		t.Fatal(err)
	}
	var deaf atomic.Bool
	inSave, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if k, ok := testsupport.ScriptKey(cmd, 1); ok && strings.HasSuffix(k, "CKPresence") && deaf.Load() {
			return testsupport.ErrInjected
		}
		if isWrite(cmd, "save") {
			once.Do(func() { close(inSave); <-proceed })
		}
		return nil
	})
	saved := make(chan error, 1)
	go func() { saved <- p.Save(ctx) }()
	<-inSave
	deaf.Store(true) // the server fences itself and gives the lock back
	eventually(t, 5*time.Second, "the fenced lock is given back", func() bool {
		return recordFields(t, r, "PlayerData", "user:11")["lock.token"] == ""
	})
	close(proceed)
	if err := <-saved; err == nil {
		t.Fatal("the late save reported success")
	}
	if rec := recordFields(t, r, "PlayerData", "user:11"); rec["lock.token"] != "" {
		t.Fatalf("the late save took the given-back lock again: %v", rec)
	}
}

// A server fences itself while an adoption's save has not landed: the lock
// still carries the token from before the adoption, and giving it back must
// name that token too (found by simulation seed 20335).
func TestFenceAfterUnlandedAdoptionGivesTheLockBack(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", fast)
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:12")
	if err != nil {
		t.Fatal(err)
	}
	var savesFail, deaf atomic.Bool
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if k, ok := testsupport.ScriptKey(cmd, 1); ok && strings.HasSuffix(k, "CKPresence") && deaf.Load() {
			return testsupport.ErrInjected
		}
		if (isWrite(cmd, "save") || isWrite(cmd, "release")) && savesFail.Load() {
			return testsupport.ErrInjected
		}
		return nil
	})
	savesFail.Store(true)
	if err := p.Release(ctx); err == nil {
		t.Fatal("the release should fail")
	}
	if q, err := d.Join(ctx, "user:12"); err != nil || q != p {
		t.Fatalf("rejoin: %v, adopted %t", err, q == p)
	}
	savesFail.Store(false)
	deaf.Store(true) // the server fences itself before any save lands
	eventually(t, 5*time.Second, "the fenced lock is given back", func() bool {
		return recordFields(t, r, "PlayerData", "user:12")["lock.token"] == ""
	})
}

// The age fence ends a session at its lock's age deadline on the driver's
// timers, whatever its executor is doing: here it is stuck in a save that
// hangs (SaveTimeout is 10 s), so no refresh and no write's own check can
// end it. A lock without the presence flag goes by age, and the session
// must end before another server may take it (LockSkew later).
func TestAgeFenceFiresWhileTheExecutorHangs(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	b := newServer(t, r, "server-b")
	short := byAge(300*time.Millisecond, 200*time.Millisecond)
	da, db := players(t, a, short), players(t, b, short)
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:11")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 1 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	defer close(hang)
	a.faults.SetBefore(func(c context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptSave) {
			select {
			case <-hang:
			case <-c.Done():
			}
			return testsupport.ErrInjected
		}
		return nil
	})
	_ = pa.Update(func(d *player) { d.Coins = 2 })
	saved := make(chan error, 1)
	go func() { saved <- pa.Save(ctx) }() // stuck on the executor
	pb, err := db.Join(ctx, "user:11")
	if err != nil {
		t.Fatalf("Join on an aged lock: %v", err)
	}
	fencedAlready(t, pa, "B took the lock by age while A's session, its executor stuck in a hung save, still lived")
	if coins(pb) != 1 {
		t.Fatalf("B got coins %d, want A's last landed save (1)", coins(pb))
	}
	if err := pa.Update(func(d *player) { d.Coins = 3 }); !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("A's Update after the fence = %v, want ErrLockLost", err)
	}
	select {
	case err := <-saved:
		t.Fatalf("the hung save returned %v before it was let go", err)
	default:
	}
}
