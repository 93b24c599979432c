package datadriver_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/messaging"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// An acquire that hangs ends at SaveTimeout: the join is refused long
// before its caller's context ends, and the node stays usable.
func TestJoinWhoseAcquireHangs(t *testing.T) {
	p := newPair(t, func(c *datadriver.NodeConfig) { c.SaveTimeout = 300 * time.Millisecond })
	d := players(t, p.a)
	p.a.faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptAcquire) {
			<-ctx.Done() // the call hangs until its context ends
			return ctx.Err()
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := d.Join(ctx, "user:1")
	took := time.Since(start)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Join = %v (ctx %v), want an error of its own before the caller's context ends", err, ctx.Err())
	}
	// LockWait (2 s) + SaveTimeout is the bound; the margin is for a slow machine.
	if took > 10*time.Second {
		t.Errorf("Join took %v; an acquire that hangs must end at SaveTimeout (300ms)", took)
	}
	p.a.faults.Clear()
	pr, err := d.Join(ctxT(t), "user:1")
	if err != nil {
		t.Fatalf("Join once Redis answers again: %v", err)
	}
	_ = pr.Release(ctxT(t))
}

// An acquire that landed but whose answer was lost leaves no lock behind:
// the node gives it back, so the player can join elsewhere at once while
// the server lives.
func TestLostAcquireAnswerGivesTheLockBack(t *testing.T) {
	p := newPair(t)
	da, db := players(t, p.a), players(t, p.b)
	p.a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isScript(cmd, record.ScriptAcquire) {
			return testsupport.ErrInjected // it ran; its answer is lost
		}
		return err
	})
	if _, err := da.Join(ctxT(t), "user:1"); err == nil {
		t.Fatal("Join succeeded with its acquire's answer lost")
	}
	p.a.faults.Clear()
	eventually(t, 5*time.Second, "the lock given back", func() bool {
		return recordFields(t, p.r, "PlayerData", "user:1")["lock.token"] == ""
	})
	pr, err := db.Join(ctxT(t), "user:1")
	if err != nil {
		t.Fatalf("Join on B: %v", err)
	}
	_ = pr.Release(ctxT(t))
}

// A lock of a live server that none of its sessions uses (an acquire that
// landed after the join gave up, a lock left by an earlier run of its JobID)
// is given back when another server asks for it: a join elsewhere gets it
// well before LockWait, instead of being locked out while the server lives.
func TestReleaseRequestForALockNoSessionUses(t *testing.T) {
	p := newPair(t)
	players(t, p.a) // A serves the driver: it answers requests for it
	db := players(t, p.b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	rk := record.Key(p.r.Namespace, "PlayerData", "user:1")
	res, err := record.Acquire(ctxT(t), p.r.Client(t), rk, record.AcquireArgs{Job: "server-a", Token: "orphan-token",
		Presence: true, MaxAge: time.Minute, Format: record.Format})
	if err != nil || res.Outcome != record.Acquired {
		t.Fatalf("planting A's orphan lock: %+v, %v", res, err)
	}
	start := time.Now()
	pr, err := db.Join(ctxT(t), "user:1")
	if err != nil {
		t.Fatalf("Join on B: %v (after %v)", err, time.Since(start))
	}
	defer func() { _ = pr.Release(ctxT(t)) }()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("B's join took %v; A should give back a lock no session of its uses when asked", took)
	}
	if !strings.Contains(p.a.logs.String(), "no session uses; giving it back") {
		t.Error("A did not log the give-back")
	}
}

// Release requests naming locks this server does not hold cost bounded
// work, whoever sends them: a flood of forged requests for thousands of
// keys makes at most a few give-back scripts a second (tokens this server
// never issued are rate limited), not one per request.
func TestForgedReleaseRequestsCostBoundedWork(t *testing.T) {
	p := newPair(t)
	players(t, p.a)
	var saves atomic.Int64
	p.a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isScript(cmd, record.ScriptSave) {
			saves.Add(1)
		}
		return nil
	})
	nc := p.n.Connect(t)
	subject := p.r.Namespace + "." + messaging.DefaultPrefix + ".server-a"
	const forged = 3000
	start := time.Now()
	for i := range forged {
		b, err := messaging.Encode(messaging.Message{Type: messaging.TypeRequest, Driver: "PlayerData",
			Key: fmt.Sprintf("user:%d", i), Requester: "attacker", Sender: "attacker", Token: fmt.Sprintf("%032x", i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "A received the requests", func() bool {
		return p.a.node.HandoffStats().RequestsReceived >= forged
	})
	time.Sleep(200 * time.Millisecond) // let queued give-backs run
	elapsed := time.Since(start)
	// 50 a second plus the first burst of 50, and slack for a slow machine.
	if bound := int64(100 + 50*elapsed.Seconds()); saves.Load() > bound {
		t.Errorf("%d forged requests made %d give-back scripts in %v; want at most %d", forged, saves.Load(), elapsed, bound)
	}
	if saves.Load() == 0 {
		t.Error("no give-back at all: a request naming an unknown lock of this server must still be tried")
	}
}
