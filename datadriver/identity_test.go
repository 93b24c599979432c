package datadriver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// startNode runs NewNode for job on r with the fast timings and opts; the
// Node, when it starts, is closed at cleanup.
func startNode(t *testing.T, r *testsupport.Redis, job string, opts ...func(*datadriver.NodeConfig)) (*datadriver.Node, error) {
	t.Helper()
	cfg := datadriver.NodeConfig{JobID: job, Redis: r.Client(t), Namespace: r.Namespace}
	fast(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := datadriver.NewNode(ctx, cfg)
	if err == nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
	}
	return n, err
}

// presenceOwner reads which instance owns job's beat (one presence shard).
func presenceOwner(t *testing.T, r *testsupport.Redis, job string) string {
	t.Helper()
	key := presencecore.KeyFor(r.Namespace)
	v, err := r.Client(t).HGet(context.Background(), presencecore.OwnersKey(key), job).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return v
}

// TestJobIDIdentity: NewNode refuses a JobID another live process beats,
// takes one left by a clean Close at once and one left by a crash within a
// TTL; a running Node that meets another instance on its JobID fences
// itself.
func TestJobIDIdentity(t *testing.T) {
	const ttl = fastTTL
	tests := []struct {
		name string
		run  func(t *testing.T, r *testsupport.Redis)
	}{
		{"two live Nodes with one JobID: the second is refused", func(t *testing.T, r *testsupport.Redis) {
			first := newServer(t, r, "server-a", fast)
			start := time.Now()
			_, err := startNode(t, r, "server-a")
			var inUse *datadriver.JobIDInUseError
			if !errors.Is(err, datadriver.ErrJobIDInUse) || !errors.As(err, &inUse) {
				t.Fatalf("second NewNode = %v, want a *JobIDInUseError", err)
			}
			if inUse.JobID != "server-a" || inUse.Instance != first.node.Instance() {
				t.Errorf("JobIDInUseError %+v, want JobID server-a and instance %s", inUse, first.node.Instance())
			}
			t.Logf("refused after %v: %v", time.Since(start), err)
			if got := presenceOwner(t, r, "server-a"); got != first.node.Instance() {
				t.Errorf("owner %q after the refusal, want the first Node's", got)
			}
		}},
		{"a Node closed cleanly: the same JobID starts at once", func(t *testing.T, r *testsupport.Redis) {
			first := newServer(t, r, "server-a", fast)
			players(t, first)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := first.node.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// A clock that never moves: a NewNode that had to wait for
			// anything would never return.
			n, err := startNode(t, r, "server-a", func(c *datadriver.NodeConfig) { c.Clock = mockclock.New() })
			if err != nil {
				t.Fatalf("NewNode after a clean Close = %v", err)
			}
			if got := presenceOwner(t, r, "server-a"); got != n.Instance() {
				t.Errorf("owner %q, want the new Node's %s", got, n.Instance())
			}
		}},
		{"a crashed Node: the same JobID starts within one TTL and takes its locks", func(t *testing.T, r *testsupport.Redis) {
			old := newServer(t, r, "server-a", fast)
			if _, err := players(t, old).Join(ctxT(t), "user:1"); err != nil {
				t.Fatal(err)
			}
			old.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected }) // no beat lands any more
			start := time.Now()
			n, err := startNode(t, r, "server-a")
			waited := time.Since(start)
			if err != nil {
				t.Fatalf("NewNode after a crash = %v", err)
			}
			if waited > 2*ttl {
				t.Errorf("NewNode took %v, want about one TTL (%v) at most", waited, ttl)
			}
			d, err := datadriver.NewDriver(n, datadriver.Config[player]{Name: "PlayerData", LockWait: 2 * time.Second, Autosave: -1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Join(ctxT(t), "user:1"); err != nil {
				t.Fatalf("the new run's Join of its old lock = %v", err)
			}
			// The crashed process comes back and shuts down: its Close must
			// not end the new instance's presence.
			old.faults.Clear()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = old.node.Close(ctx)
			if got := presenceOwner(t, r, "server-a"); got != n.Instance() {
				t.Errorf("owner %q after the old process closed, want the new Node's %s", got, n.Instance())
			}
			t.Logf("started after %v", waited)
		}},
		{"two live instances forced onto one JobID: the first fences itself", func(t *testing.T, r *testsupport.Redis) {
			first := newServer(t, r, "server-a", fast)
			p, err := players(t, first).Join(ctxT(t), "user:2")
			if err != nil {
				t.Fatal(err)
			}
			// The second process's beat, written as its claim would.
			c := r.Client(t)
			key := presencecore.KeyFor(r.Namespace)
			ctx := context.Background()
			exp := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
			if err := c.HSet(ctx, key, "server-a", exp).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, presencecore.OwnersKey(key), "server-a", "intruder").Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the session did not end")
			}
			if !errors.Is(p.Err(), datadriver.ErrFenced) {
				t.Errorf("session ended with %v, want ErrFenced", p.Err())
			}
			// The fence comes first (it waits on no log write); the error
			// naming the other instance follows it.
			eventually(t, 5*time.Second, "the conflict logged", func() bool {
				return strings.Contains(first.logs.String(), "other_instance=intruder")
			})
			logs := first.logs.String()
			for line := range strings.Lines(logs) {
				if strings.Count(line, " job=") > 1 {
					t.Errorf("a log line names the job twice: %s", line)
				}
			}
			for _, want := range []string{"level=ERROR", "other_instance=intruder", "instance=" + first.node.Instance()} {
				if !strings.Contains(logs, want) {
					t.Errorf("logs lack %q:\n%s", want, logs)
				}
			}
			if got := c.HGet(ctx, key, "server-a").Val(); got != exp {
				t.Errorf("the other instance's beat was overwritten: %q, want %q", got, exp)
			}
		}},
		{"an empty JobID: a random one, with presence", func(t *testing.T, r *testsupport.Redis) {
			s := newServer(t, r, "", fast)
			job := s.node.JobID()
			if !strings.HasPrefix(job, "anon-") {
				t.Fatalf("JobID %q, want anon-...", job)
			}
			if got := presenceOwner(t, r, job); got != s.node.Instance() {
				t.Errorf("presence owner of %s = %q, want %s", job, got, s.node.Instance())
			}
			if _, err := players(t, s).Join(ctxT(t), "user:3"); err != nil {
				t.Fatal(err)
			}
			rec := recordFields(t, r, "PlayerData", "user:3")
			if rec["lock.job"] != job || rec["lock.presence"] != "1" {
				t.Errorf("lock.job %q, lock.presence %q; want %s, 1", rec["lock.job"], rec["lock.presence"], job)
			}
		}},
		{"DisableHandoff: the JobID is claimed like any other", func(t *testing.T, r *testsupport.Redis) {
			// An admin tool given a live server's JobID must never take that
			// server's locks as its own: it is refused before it can load.
			first := newServer(t, r, "server-a", fast)
			p, err := players(t, first).Join(ctxT(t), "user:4")
			if err != nil {
				t.Fatal(err)
			}
			_, err = startNode(t, r, "server-a", func(c *datadriver.NodeConfig) { c.DisableHandoff = true })
			if !errors.Is(err, datadriver.ErrJobIDInUse) {
				t.Fatalf("NewNode with handoff off and a live server's JobID = %v, want ErrJobIDInUse", err)
			}
			if presenceOwner(t, r, "server-a") != first.node.Instance() {
				t.Error("the refused Node took the JobID's presence")
			}
			if err := p.Update(func(*player) {}); err != nil {
				t.Errorf("the live server's session after the refused Node: %v", err)
			}
		}},
		{"a lock of this JobID written after the claim is not an earlier run's", func(t *testing.T, r *testsupport.Redis) {
			s := newServer(t, r, "server-a", fast)
			d := players(t, s)
			rk := record.Key(r.Namespace, "PlayerData", "user:5")
			// Written now, under this JobID, by no session of this process:
			// whoever wrote it beat no presence of its own, so nothing proves
			// it stopped. It is not taken.
			if res, err := record.Acquire(ctxT(t), r.Client(t), rk, record.AcquireArgs{Job: "server-a", Token: "other",
				Presence: true, MaxAge: time.Minute, Skew: time.Minute, Format: record.Format}); err != nil || res.Outcome != record.Acquired {
				t.Fatalf("planting the lock: %+v, %v", res, err)
			}
			if _, err := d.Load(ctxT(t), "user:5", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrLocked) {
				t.Fatalf("Load = %v, want ErrLocked", err)
			}
			if tok := recordFields(t, r, "PlayerData", "user:5")["lock.token"]; tok != "other" {
				t.Fatalf("lock.token = %q, want the planted lock untouched", tok)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, testsupport.StartOwnRedis(t))
		})
	}
}

// TestNewNodeChecksRedis: NewNode fails within PingTimeout, with
// ErrRedisUnavailable, when Redis refuses connections or does not answer.
func TestNewNodeChecksRedis(t *testing.T) {
	r := testsupport.StartRedis(t)
	tests := []struct {
		name  string
		fault func(p *testsupport.Proxy)
	}{
		{"refused", (*testsupport.Proxy).Refuse},
		{"no answer", (*testsupport.Proxy).Blackhole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testsupport.StartProxy(t, r.Addr)
			tt.fault(p)
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			const bound = 300 * time.Millisecond
			start := time.Now()
			n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
				JobID: "server-a", Redis: rdb, Namespace: r.Namespace, PingTimeout: bound,
			})
			if err == nil {
				_ = n.Close(context.Background())
			}
			if !errors.Is(err, datadriver.ErrRedisUnavailable) {
				t.Fatalf("NewNode = %v, want ErrRedisUnavailable", err)
			}
			if d := time.Since(start); d > bound+time.Second {
				t.Errorf("NewNode failed after %v, want about PingTimeout (%v)", d, bound)
			}
		})
	}
	t.Run("negative PingTimeout", func(t *testing.T) {
		_, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{Redis: r.Client(t), PingTimeout: -time.Second})
		if !errors.Is(err, datadriver.ErrInvalidConfig) {
			t.Fatalf("NewNode = %v, want ErrInvalidConfig", err)
		}
	})
}

// TestNewNodeChecksNATS: NewNode fails within PingTimeout, with
// ErrBusDown, when the NATS connection it is given is closed or its server
// does not answer.
func TestNewNodeChecksNATS(t *testing.T) {
	r := testsupport.StartRedis(t)
	ns := testsupport.StartNATS(t)
	const bound = 300 * time.Millisecond
	start := func(t *testing.T, nc *nats.Conn) error {
		begin := time.Now()
		n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
			JobID: "server-a", Redis: r.Client(t), NATS: nc, Namespace: r.Namespace, PingTimeout: bound,
		})
		if err == nil {
			_ = n.Close(context.Background())
		}
		if d := time.Since(begin); d > bound+time.Second {
			t.Errorf("NewNode answered after %v, want about PingTimeout (%v)", d, bound)
		}
		return err
	}
	t.Run("closed", func(t *testing.T) {
		nc := ns.Connect(t)
		nc.Close()
		if err := start(t, nc); !errors.Is(err, datadriver.ErrBusDown) {
			t.Fatalf("NewNode = %v, want ErrBusDown", err)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		host := strings.TrimPrefix(ns.URL, "nats://")
		p := testsupport.StartProxy(t, host)
		nc, err := nats.Connect("nats://"+p.Addr, nats.Name(t.Name()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		p.Blackhole()
		if err := start(t, nc); !errors.Is(err, datadriver.ErrBusDown) {
			t.Fatalf("NewNode = %v, want ErrBusDown", err)
		}
	})
	t.Run("answers", func(t *testing.T) {
		if err := start(t, ns.Connect(t)); err != nil {
			t.Fatalf("NewNode = %v", err)
		}
	})
}

// TestPresenceShardsNode: Nodes with PresenceShards beat into their shards
// and take a crashed server's lock through presence as with one hash.
func TestPresenceShardsNode(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	shards := func(c *datadriver.NodeConfig) { c.PresenceShards = 8 }
	a := newServer(t, r, "server-a", fast, shards)
	b := newServer(t, r, "server-b", fast, shards)
	key := presencecore.KeyFor(r.Namespace)
	for _, s := range []*server{a, b} {
		k := presencecore.ShardKey(key, presencecore.ShardOf(s.node.JobID(), 8))
		if !r.Client(t).HExists(context.Background(), k, s.node.JobID()).Val() {
			t.Errorf("%s does not beat into its shard %s", s.node.JobID(), k)
		}
	}
	if _, err := players(t, a).Join(ctxT(t), "user:4"); err != nil {
		t.Fatal(err)
	}
	crash(t, a)
	db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	start := time.Now()
	if _, err := db.Join(ctxT(t), "user:4"); err != nil {
		t.Fatalf("B's join of the crashed A's key = %v", err)
	}
	t.Logf("taken over after %v", time.Since(start))
}
