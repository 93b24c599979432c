package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// steppedServer is a Node on the steppable Redis sr, with the short
// presence timings and, when nc is set, that bus.
func steppedServer(t *testing.T, sr *testsupport.SteppableRedis, job string, n *testsupport.NATS) *server {
	t.Helper()
	s := &server{rdb: sr.Client(t), prdb: sr.Client(t), faults: &testsupport.FaultHook{}, logs: &testsupport.LogBuffer{}}
	s.rdb.AddHook(s.faults)
	s.prdb.AddHook(s.faults)
	cfg := datadriver.NodeConfig{JobID: job, Redis: s.rdb, PresenceRedis: s.prdb, Namespace: sr.Namespace,
		Logger: s.logs.Logger(slog.LevelDebug)}
	fast(&cfg)
	if n != nil {
		cfg.NATS = n.Connect(t)
	}
	node, err := datadriver.NewNode(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.node = node
	t.Cleanup(func() {
		s.faults.Clear()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = node.Close(ctx)
	})
	return s
}

// A forward step of the Redis host's clock far past LockTTL + LockSkew
// makes every lock look old and every beat look expired until its server
// beats again; no lock of a live holder changes hands for it: a lock with
// the presence flag goes only with the proof of a crash (two stopped reads
// a beat apart), and a live holder's next beat breaks it. The holder's
// requests are lost here (B's bus reaches nobody), so only presence could
// have moved a lock. (The step used to let B take 45 of 50 live locks on a
// single not-alive read.)
func TestForwardClockStepTakesNoLiveLock(t *testing.T) {
	sr := testsupport.StartRedisSteppable(t)
	a := steppedServer(t, sr, "server-a", testsupport.StartOwnNATS(t))
	b := steppedServer(t, sr, "server-b", testsupport.StartOwnNATS(t)) // a bus of its own: its requests reach nobody
	short := func(c *datadriver.Config[player]) {
		c.LockTTL, c.LockSkew, c.LockWait = time.Second, time.Second, 3*time.Second
	}
	da, db := players(t, a, short), players(t, b, short)
	ctx := ctxT(t)
	const n = 20
	var sessions []*datadriver.Profile[player]
	for i := range n {
		p, err := da.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, p)
	}
	sr.Step(300 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for i := range n {
		wg.Go(func() {
			p, err := db.Join(ctx, fmt.Sprintf("user:%d", i))
			if err == nil {
				mu.Lock()
				taken++
				mu.Unlock()
				_ = p.Release(ctx)
			} else if !errors.Is(err, datadriver.ErrWaitTimeout) {
				t.Errorf("B's join of user:%d = %v, want ErrWaitTimeout", i, err)
			}
		})
	}
	wg.Wait()
	if taken != 0 {
		t.Errorf("B took %d of %d live locks after a +300 s step of the Redis clock\nA's log:\n%s\nB's log:\n%s",
			taken, n, a.logs, b.logs)
	}
	for i, p := range sessions {
		if err := p.Update(func(pl *player) { pl.Coins++ }); err != nil {
			t.Errorf("A's session of user:%d after the step: %v", i, err)
		}
	}
}

// A backward step of the Redis host's clock leaves every beat stamped
// ahead of it; a holder that crashes then is taken over within about one
// presence TTL more than without the step (a beat further ahead than one
// TTL counts as expiring one TTL after it is first seen unchanged), not
// after the whole step (it used to take 30.9 s for a 30 s step, against
// 2.4 s).
func TestBackwardClockStepThenACrash(t *testing.T) {
	sr := testsupport.StartRedisSteppable(t)
	bus := testsupport.StartNATS(t)
	a := steppedServer(t, sr, "server-a", bus)
	b := steppedServer(t, sr, "server-b", bus)
	long := func(c *datadriver.Config[player]) { c.LockWait = 20 * time.Second }
	da, db := players(t, a, long), players(t, b, long)
	ctx := ctxT(t)
	const n = 5
	for i := range n {
		if _, err := da.Join(ctx, fmt.Sprintf("user:%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sr.Step(-30 * time.Second)
	crash(t, a)
	crashed := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := db.Join(ctx, fmt.Sprintf("user:%d", i))
			took := time.Since(crashed)
			if err != nil {
				t.Errorf("B's join of user:%d after A crashed: %v (after %v)", i, err, took)
				return
			}
			// PresenceTTL 1 s, beat 100 ms: about 1.5 s without the step,
			// one TTL more with it; 30 s would be the step.
			if took > 6*time.Second {
				t.Errorf("user:%d taken over %v after the crash; a backward step must delay it by at most one TTL", i, took)
			}
			_ = p.Release(ctx)
		})
	}
	wg.Wait()
}
