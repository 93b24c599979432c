package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// presenceClockSkew is a go-redis hook that moves the Redis time in every
// presence read's answer by skew: what a reader sees when the master
// serving the presence shard runs its clock skew ahead of the others.
// Everything that master compares (a beat's expiry against its own TIME)
// stays consistent, as with a real skew; only a time the reader carries to
// another master is off.
type presenceClockSkew struct{ skew time.Duration }

func (h presenceClockSkew) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h presenceClockSkew) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok && err == nil && isScript(cmd, presencescript.NameRead) {
			if v, ok := c.Val().([]any); ok && len(v) == 3 {
				if now, ok := v[2].(int64); ok {
					c.SetVal([]any{v[0], v[1], now + h.skew.Milliseconds()})
				}
			}
		}
		return err
	}
}

func (h presenceClockSkew) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isStealOf matches an acquire by another server that takes job's lock as
// proven stopped.
func isStealOf(job string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		in, ok := testsupport.Identify(cmd)
		if !ok || in.Script != record.ScriptAcquire {
			return false
		}
		a, err := record.ParseAcquireArgs(in.Args)
		return err == nil && a.StealJob == job && a.Job != job
	}
}

// A steal of a crashed holder's lock takes only a lock the joiner saw was
// written before the presence read that proved the holder stopped (judged on
// the joiner's own clock: when it saw the lock, less the lock's age) and
// names its token, so a holder that came back and took the key again keeps
// it. On a Redis Cluster the presence shard and the record live on two
// masters whose clocks may differ; no time of one is compared with the
// other's. Here A (which answers no release requests) is cut off from
// Redis long enough for B to prove it stopped; B's steal is then delayed in
// flight while A comes back and its player rejoins it (a new lock, written
// after the proof). The steal must find A's new lock and leave it.
func TestClusterStealBoundAcrossMasterClocks(t *testing.T) {
	env := startClusterEnv(t)
	for _, tc := range []struct {
		name string
		skew time.Duration
	}{
		{"masters agree", 0},
		{"presence master 5 s ahead of the record master", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := env.scope(map[bool]string{true: "skew", false: "noskew"}[tc.skew != 0])
			// A answers no release request (no bus): its lock changes hands
			// only by its release or by a proof that it stopped.
			a := sc.server(t, "server-a", func(c *datadriver.NodeConfig) { c.NATS = nil })
			b := sc.serverWith(t, "server-b", []redis.Hook{presenceClockSkew{tc.skew}})
			da := players(t, a)
			db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 2500 * time.Millisecond })
			ctx := ctxT(t)
			// The record on another master than A's presence shard: the
			// steal compares times of two masters.
			shard := presencecore.ShardKey(sc.ns+":"+presencecore.DefaultKeyName, presencecore.ShardOf("server-a", clusterPresenceShards))
			key := "user:0"
			for i := 1; sc.masterOf(sc.recordKey(key)) == sc.masterOf(shard); i++ {
				key = fmt.Sprintf("user:%d", i)
			}
			if _, err := da.Join(ctx, key); err != nil {
				t.Fatal(err)
			}

			// A is cut off from Redis: its beats stop, its session is fenced,
			// its give-back cannot land.
			a.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
			inSteal, proceed := holdFirst(b, isStealOf("server-a"))
			type result struct {
				p   *datadriver.Profile[player]
				err error
			}
			joined := make(chan result, 1)
			go func() {
				p, err := db.Join(ctx, key)
				joined <- result{p, err}
			}()
			select {
			case <-inSteal: // B proved A stopped; its steal is on its way
			case <-time.After(5 * time.Second):
				t.Fatal("B never tried to take the lock as proven stopped")
			}

			// A comes back, beats again, and its player rejoins it.
			a.faults.Clear()
			var pa2 *datadriver.Profile[player]
			eventually(t, 5*time.Second, "the player rejoins A", func() bool {
				p, err := da.Join(ctx, key)
				pa2 = p
				return err == nil
			})
			rec := sc.record(t, key)
			proceed() // B's steal lands now, after A's new lock

			res := <-joined
			if res.err == nil {
				t.Logf("A's log:\n%s\nB's log:\n%s", a.logs, b.logs)
				t.Fatalf("B took the lock A wrote after the proof (lock.at %s, A's epoch %d, B's %d), and A's session still accepts Update (%v): the key is live on A and B at once",
					rec["lock.at"], pa2.Epoch(), res.p.Epoch(), pa2.Update(func(d *player) { d.Coins++ }))
			}
			if !errors.Is(res.err, datadriver.ErrWaitTimeout) {
				t.Fatalf("B's join = %v, want ErrWaitTimeout: A is alive and holds the key", res.err)
			}
			if got := sc.record(t, key); got["lock.job"] != "server-a" || got["lock.token"] != rec["lock.token"] {
				t.Fatalf("A's lock was taken: %v", got)
			}
			if err := pa2.Update(func(d *player) { d.Coins++ }); err != nil {
				t.Fatalf("A's session after B's attempt: %v", err)
			}
			if err := pa2.Save(ctx); err != nil {
				t.Fatalf("A's save after B's attempt: %v", err)
			}
		})
	}
}
