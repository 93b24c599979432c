package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The crash points of a move, each stopped at exactly by the move hook:
// before the flip, after it (the commit lost), and the target dying after
// its accept or after the flip. Whatever happens, one server ends up
// holding the key with the last data that landed, and nothing that landed
// is lost.

// cutRedis makes every Redis call of s fail from now on (its presence
// stops: after PresenceTTL it reads stopped, as a dead process would).
func cutRedis(s *server) {
	s.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
}

// moveAsync runs p.MoveTo(to) within d; the channel gets its answer.
func moveAsync(p *datadriver.Profile[player], to string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		done <- p.MoveTo(ctx, to)
	}()
	return done
}

// joinCoins joins key on d (waiting out a crashed holder) and returns its
// coins.
func joinCoins(t *testing.T, d *datadriver.Driver[player], key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := d.Join(ctx, key)
	if err != nil {
		t.Fatalf("join %s on %s: %v", key, d.Node().JobID(), err)
	}
	return coins(q)
}

// savedWith joins key on d, saves c coins, then changes them to c+1
// without saving (what a crash of the holder loses).
func savedWith(t *testing.T, d *datadriver.Driver[player], key string, c int) *datadriver.Profile[player] {
	t.Helper()
	p := joinWith(t, d, key, c)
	if err := p.Save(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := p.Update(func(d *player) { d.Coins = c + 1 }); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMoveSourceDiesBeforeTheFlip(t *testing.T) {
	mp := newMovePair(t, func(c *datadriver.Config[player]) {
		c.LockWait = 8 * time.Second
		c.History = -1 // no version due: the move writes nothing before its flip
	})
	const key = "user:src-dies"
	p := savedWith(t, mp.da, key, 10)
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "accepted" {
			cutRedis(mp.a) // the source dies between the accept and its flip
		}
	})
	err := <-moveAsync(p, "server-b", time.Second)
	if err == nil || !errors.Is(err, datadriver.ErrLockLost) {
		t.Fatalf("MoveTo of a source cut from Redis before its flip: %v, want the session fenced (ErrLockLost)", err)
	}
	crash(t, mp.a)
	// The target's pending move expires, the lock stays the source's, and a
	// join takes it over once the source is proven stopped: the last landed
	// save.
	if c := joinCoins(t, mp.db, key); c != 10 {
		t.Fatalf("coins after the takeover = %d, want 10 (the source's last landed save)", c)
	}
	if f := recordFields(t, mp.r, "PlayerData", key); f[record.FieldMoveState] != "" {
		t.Fatalf("the record names a move that never flipped: %v", f)
	}
}

func TestMoveCommitLostTargetReadsTheRecord(t *testing.T) {
	mp := newMovePair(t)
	const key = "user:commit-lost"
	p := joinWith(t, mp.da, key, 20)
	release, flipped := make(chan struct{}), make(chan struct{})
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "flipped" {
			close(flipped)
			<-release // the flip landed; the commit waits
		}
	})
	moved := moveAsync(p, "server-b", time.Second)
	<-flipped
	joined := make(chan int, 1)
	go func() { joined <- joinCoins(t, mp.db, key) }()
	select {
	case c := <-joined:
		if c != 20 {
			t.Fatalf("target coins = %d, want 20", c)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the target did not resolve the move from the record without its commit")
	}
	close(release)
	if err := <-moved; err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	if !errors.Is(p.Err(), datadriver.ErrMoved) {
		t.Fatalf("source Err = %v, want ErrMoved", p.Err())
	}
}

func TestMoveSourceDiesAfterTheFlip(t *testing.T) {
	mp := newMovePair(t)
	const key = "user:src-dies-after"
	p := joinWith(t, mp.da, key, 30)
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "flipped" {
			cutRedis(mp.a)
		}
	})
	if err := <-moveAsync(p, "server-b", time.Second); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	crash(t, mp.a)
	if c := joinCoins(t, mp.db, key); c != 30 {
		t.Fatalf("target coins = %d, want 30", c)
	}
}

func TestMoveTargetDiesAfterAccept(t *testing.T) {
	t.Run("the flip hands the lock to the dead target", func(t *testing.T) {
		mp := newMovePair(t, func(c *datadriver.Config[player]) { c.LockWait = 8 * time.Second })
		const key = "user:tgt-dies"
		p := joinWith(t, mp.da, key, 40)
		datadriver.SetMoveHook(mp.da, func(point string) {
			if point == "accepted" {
				cutRedis(mp.b)
			}
		})
		if err := <-moveAsync(p, "server-b", time.Second); err != nil {
			t.Fatalf("MoveTo: %v", err)
		}
		crash(t, mp.b)
		// A normal crash takeover from the target, with the moved data.
		if c := joinCoins(t, mp.da, key); c != 40 {
			t.Fatalf("coins after taking over from the dead target = %d, want 40", c)
		}
	})
	t.Run("the flip comes too late: the source keeps it", func(t *testing.T) {
		mp := newMovePair(t)
		const key = "user:tgt-dies-slow"
		p := joinWith(t, mp.da, key, 50)
		datadriver.SetMoveHook(mp.da, func(point string) {
			if point == "accepted" {
				cutRedis(mp.b)
				time.Sleep(1200 * time.Millisecond) // past the move's expiry
			}
		})
		err := <-moveAsync(p, "server-b", time.Second)
		var re *datadriver.MoveRefusedError
		if !errors.As(err, &re) || re.Reason != datadriver.RefusedExpired {
			t.Fatalf("MoveTo whose flip came after the expiry: %v, want refused expired", err)
		}
		stillLive(t, p, 50)
	})
}

func TestMoveTargetDiesAfterTheFlip(t *testing.T) {
	mp := newMovePair(t, func(c *datadriver.Config[player]) { c.LockWait = 8 * time.Second })
	const key = "user:tgt-dies-after"
	p := joinWith(t, mp.da, key, 60)
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "flipped" {
			cutRedis(mp.b)
		}
	})
	if err := <-moveAsync(p, "server-b", time.Second); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	crash(t, mp.b)
	if c := joinCoins(t, mp.da, key); c != 60 {
		t.Fatalf("coins after taking over from the dead target = %d, want 60", c)
	}
}

// TestMoveCommitAfterTheTargetsLeaseLapsed: the commit reaches a target
// whose presence lease lapsed since its accept. It must not install the
// profile (another server may take the lock), and must not stop: the
// target's driver keeps answering (the long simulation found it
// deadlocked on its own mutex), and the lock, given back once the target
// reaches Redis again, goes to the next join with the moved data.
func TestMoveCommitAfterTheTargetsLeaseLapsed(t *testing.T) {
	mp := newMovePair(t, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	const key = "user:lapsed-target"
	p := joinWith(t, mp.da, key, 41)
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "accepted" {
			cutRedis(mp.b) // the target's beats fail from now on
			eventually(t, 10*time.Second, "the target's lease lapses", func() bool { return mp.b.node.Healthy() != nil })
		}
	})
	if err := <-moveAsync(p, "server-b", 15*time.Second); err != nil {
		t.Fatalf("MoveTo: %v (the flip runs on the source, whose Redis is fine)", err)
	}
	answered := make(chan bool, 1)
	go func() { answered <- mp.db.MoveHeld(key) }()
	select {
	case held := <-answered:
		if held {
			t.Fatal("a target whose lease lapsed holds the moved profile")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the target's driver does not answer after a commit that came past its lease")
	}
	mp.b.faults.Clear() // the target reaches Redis again: it gives the lock back
	if c := joinCoins(t, mp.da, key); c != 41 {
		t.Fatalf("the next join got %d coins, want the 41 the flip wrote", c)
	}
}

// A flip that landed but whose answer was lost to the source, and whose
// commit never reaches the target (both lost): the source reads the record
// and ends with ErrMoved (MoveTo answers nil); the target learns from the record that it owns the key, and its Join
// gets the moved data.
func TestMoveFlipAnswerAndCommitLost(t *testing.T) {
	mp := newMovePair(t)
	const key = "user:answer-lost"
	p := joinWith(t, mp.da, key, 30)
	mp.a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if err == nil && isScript(cmd, record.ScriptFlip) {
			return testsupport.ErrInjected // it ran; its answer is lost
		}
		return err
	})
	release, flipped := make(chan struct{}), make(chan struct{})
	datadriver.SetMoveHook(mp.da, func(point string) {
		if point == "flipped" {
			close(flipped)
			<-release // the source knows the flip landed; its commit is held back
		}
	})
	moved := moveAsync(p, "server-b", 10*time.Second)
	select {
	case <-flipped:
	case err := <-moved:
		t.Fatalf("MoveTo with the flip's answer lost ended before the record said it landed: %v", err)
	}
	if c := joinCoins(t, mp.db, key); c != 30 {
		t.Fatalf("target coins = %d, want 30 (the moved data)", c)
	}
	close(release)
	if err := <-moved; err != nil {
		t.Fatalf("MoveTo with the flip's answer lost: %v, want nil (the record says it landed)", err)
	}
	if err := p.Update(func(d *player) { d.Coins = 99 }); !errors.Is(err, datadriver.ErrMoved) {
		t.Fatalf("Update on the source after the move: %v, want ErrMoved", err)
	}
	if f := recordFields(t, mp.r, "PlayerData", key); f["lock.job"] != "server-b" || f[record.FieldMoveState] != record.MoveCommitted {
		t.Fatalf("record after the move: %v", f)
	}
}

// A move whose data the target's T cannot hold (the two servers' types
// differ): the prepare is only scanned, so the move lands; the target
// cannot decode the data once the flip landed, builds no profile, and
// gives the lock back. The moved bytes stay in the record: the source's
// driver loads them again.
func TestMoveWhoseDataTheTargetCannotDecode(t *testing.T) {
	pr := newPair(t)
	da := players(t, pr.a)
	type otherPlayer struct{ Coins string }
	if _, err := datadriver.NewDriver(pr.b.node, datadriver.Config[otherPlayer]{Name: "PlayerData", Autosave: -1}); err != nil {
		t.Fatal(err)
	}
	const key = "user:other-type"
	p := joinWith(t, da, key, 41)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	eventually(t, 5*time.Second, "the target gives the lock back", func() bool {
		f := recordFields(t, pr.r, "PlayerData", key)
		return f["lock.token"] == "" && f[record.FieldMoveState] == record.MoveCommitted
	})
	if !strings.Contains(pr.b.logs.String(), "does not decode here") {
		t.Errorf("the target did not log the data it could not decode:\n%s", pr.b.logs.String())
	}
	if c := joinCoins(t, da, key); c != 41 {
		t.Fatalf("coins loaded again on the source = %d, want 41 (the moved data)", c)
	}
}
