//go:build linux

package faulttest

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// TestGameserverLifecycle checks the harness itself: a gameserver joins,
// plays and saves, dumps its state on stdin and SIGUSR1, and on SIGTERM
// closes its Node (every profile saved and released) and exits 0.
func TestGameserverLifecycle(t *testing.T) {
	t.Parallel()
	c := newCluster(t, testsupport.StartOwnRedis(t))
	o := gsOpts{job: "a", count: 5, update: 20 * time.Millisecond, save: 100 * time.Millisecond, tm: shortTimings()}
	a := c.start(o)
	c.mustWait(10*time.Second, "5 joins and saves", func() bool { return a.keys(EvJoined) == 5 && a.keys(EvSaved) == 5 })

	d := a.dump()
	if len(d.Keys) != 5 {
		t.Fatalf("dump has %d keys, want 5", len(d.Keys))
	}
	for _, k := range d.Keys {
		if !k.Live || k.Sessions != 1 || k.Updates == 0 || k.LastAfter < k.LastBefore {
			t.Errorf("dump of %s = %+v; want a live session with updates", k.Key, k)
		}
	}
	a.sig(syscall.SIGUSR1)
	c.mustWait(10*time.Second, "a dump on SIGUSR1", func() bool { return a.count(EvDump) == 2 })
	for _, j := range a.events(EvJoined) {
		if j.Epoch != 1 || j.LockAtMS == 0 || j.Coins != 0 {
			t.Errorf("joined %+v; want epoch 1, lock.at read, 0 coins", j)
		}
	}

	if code := a.terminate(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if cl := a.events(EvClosed); len(cl) != 1 || cl[0].Err != "" {
		t.Errorf("closed events %+v; want one without error", cl)
	}
	acks := acksBefore(time.Now(), a)
	for k, r := range c.mustRecords(c.rdb, o.keys()) {
		if r.Job != "" || r.Token != "" {
			t.Errorf("%s still locked by %q after Close", k, r.Job)
		}
		if r.Data.Coins < acks[k] || r.Data.Writer != "a" {
			t.Errorf("%s: record %+v, acknowledged %d coins", k, r.Data, acks[k])
		}
	}
}

// TestRedisAOFHelpers checks the persistent Redis of testsupport: every
// acknowledged write survives kill -9, a graceful SHUTDOWN, and is in a copy
// of the stopped server's data.
func TestRedisAOFHelpers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testsupport.StartOwnRedisAOF(t)
	rdb := r.Client(t)
	const n = 500
	write := func(round int) {
		t.Helper()
		for i := range n {
			if err := rdb.Set(ctx, r.Key(fmt.Sprint(i)), round, 0).Err(); err != nil {
				t.Fatalf("round %d: set %d: %v", round, i, err)
			}
		}
	}
	check := func(where string, c *testsupport.Redis, round int) {
		t.Helper()
		cl := c.Client(t, func(o *redis.Options) { o.MaxRetries = 10 })
		for i := range n {
			v, err := cl.Get(ctx, r.Key(fmt.Sprint(i))).Int()
			if err != nil || v != round {
				t.Fatalf("%s: key %d = %d, %v; want %d", where, i, v, err, round)
			}
		}
	}

	write(1)
	r.Stop(t) // kill -9
	check("copy after kill -9", r.StartCopy(t), 1)
	r.Start(t)
	check("restart after kill -9", r, 1)

	write(2)
	r.Shutdown(t)
	r.Shutdown(t) // a stopped server: nothing to do
	check("copy after SHUTDOWN", r.StartCopy(t), 2)
	r.Start(t)
	check("restart after SHUTDOWN", r, 2)

	write(3)
	r.Restart(t)
	check("Restart", r, 3)
}
