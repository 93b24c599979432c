package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// replicatedNode is a Node on the primary of rr that waits for one replica.
func replicatedNode(tb testing.TB, rr *testsupport.ReplicatedRedis, job string) *datadriver.Node {
	tb.Helper()
	logs := &testsupport.LogBuffer{}
	n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
		JobID: job, Redis: rr.Client(tb), Namespace: rr.Namespace,
		MinReplicas: 1, ReplicaTimeout: 300 * time.Millisecond,
		Logger: logs.Logger(slog.LevelDebug),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}

// With MinReplicas, explicit saves, releases and trade commits wait for the
// replica; when it does not answer in time they say so, and the write
// stands.
func TestReplicaMinReplicas(t *testing.T) {
	rr := testsupport.StartRedisReplicated(t, 1)
	n := replicatedNode(t, rr, "server-a")
	d, err := datadriver.NewDriver(n, datadriver.Config[bag]{Name: "PlayerData", Autosave: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	replica := rr.Replica(0).Client(t)
	rk := record.Key(rr.Namespace, "PlayerData", "user:1")

	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	q, err := d.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(b *bag) { b.Coins = 1 })
	if err := p.Save(ctx); err != nil {
		t.Fatalf("Save with a live replica: %v", err)
	}
	// WAIT answered: the replica has the write already.
	if v, err := replica.HGet(ctx, rk, "ver").Result(); err != nil || v != "1" {
		t.Fatalf("the replica's ver = %q, %v right after the Save returned; want 1", v, err)
	}

	rr.PauseReplica(t, 0)
	_ = p.Update(func(b *bag) { b.Coins = 2 })
	start := time.Now()
	err = p.Save(ctx)
	if !errors.Is(err, datadriver.ErrNotReplicated) {
		t.Fatalf("Save with the replica paused = %v, want ErrNotReplicated", err)
	}
	t.Logf("Save reported ErrNotReplicated after %s (ReplicaTimeout 300 ms)", time.Since(start))
	if v, _ := rr.Client(t).HGet(ctx, rk, "ver").Result(); v != "2" {
		t.Fatalf("the primary's ver = %q, want 2: the write stands", v)
	}
	if err := p.Update(func(b *bag) { b.Coins = 3 }); err != nil {
		t.Fatalf("the profile after ErrNotReplicated: %v (it stays live)", err)
	}

	// A lock a failover could lose is no lock: the join fails closed and
	// gives it back.
	if _, err := d.Join(ctx, "user:3"); !errors.Is(err, datadriver.ErrNotReplicated) {
		t.Fatalf("Join with the replica paused = %v, want ErrNotReplicated", err)
	}
	eventually(t, 5*time.Second, "the unreplicated lock given back", func() bool {
		tok, _ := rr.Client(t).HGet(ctx, record.Key(rr.Namespace, "PlayerData", "user:3"), "lock.token").Result()
		return tok == ""
	})
	err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
		datadriver.TradeData(tx, p).Coins--
		datadriver.TradeData(tx, q).Coins++
		return nil
	}, p, q)
	if !errors.Is(err, datadriver.ErrNotReplicated) {
		t.Fatalf("Trade with the replica paused = %v, want ErrNotReplicated", err)
	}
	var got bag
	q.View(func(b *bag) { got = *b })
	if got.Coins != 1 {
		t.Fatalf("the trade did not stand: %+v", got)
	}

	err = p.Release(ctx)
	if !errors.Is(err, datadriver.ErrNotReplicated) {
		t.Fatalf("Release with the replica paused = %v, want ErrNotReplicated", err)
	}
	if !errors.Is(p.Err(), datadriver.ErrReleased) {
		t.Fatalf("after Release: Err = %v, want ErrReleased (the release stands)", p.Err())
	}
	if v, _ := rr.Client(t).HGet(ctx, rk, "lock.token").Result(); v != "" {
		t.Fatalf("the primary's lock.token = %q after the release, want free", v)
	}
	rr.ResumeReplica(t, 0)
	if err := q.Release(ctx); err != nil {
		t.Fatalf("Release with the replica back: %v", err)
	}
}

// Autosaves never wait for replicas.
func TestReplicaAutosaveDoesNotWait(t *testing.T) {
	rr := testsupport.StartRedisReplicated(t, 1)
	n := replicatedNode(t, rr, "server-a")
	saveErrs := make(chan error, 4)
	d, err := datadriver.NewDriver(n, datadriver.Config[bag]{Name: "PlayerData", Autosave: 50 * time.Millisecond,
		OnSaveError: func(_ string, err error) { saveErrs <- err }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	rr.PauseReplica(t, 0)
	defer rr.ResumeReplica(t, 0)
	_ = p.Update(func(b *bag) { b.Coins = 5 })
	rk := record.Key(rr.Namespace, "PlayerData", "user:3")
	eventually(t, 5*time.Second, "an autosave lands", func() bool {
		v, _ := rr.Client(t).HGet(ctx, rk, "ver").Result()
		return v == "1"
	})
	select {
	case err := <-saveErrs:
		t.Fatalf("an autosave reported %v; autosaves do not wait for replicas", err)
	default:
	}
}

// Replica waits never starve the beat: with MinReplicas, a replica that
// does not answer and forty players saving in a loop over a pool of four
// connections, every durable write waits its ReplicaTimeout (at most half
// the pool at once), and the server never fences itself: its beats go
// through a client of their own.
func TestReplicaWaitsDoNotStarveTheBeat(t *testing.T) {
	rr := testsupport.StartRedisReplicated(t, 1)
	logs := &testsupport.LogBuffer{}
	rdb := rr.Client(t, func(o *redis.Options) { o.PoolSize = 4 })
	n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
		JobID: "server-a", Redis: rdb, Namespace: rr.Namespace,
		MinReplicas: 1, ReplicaTimeout: 300 * time.Millisecond,
		Beat: 250 * time.Millisecond, PresenceTTL: 1500 * time.Millisecond, // a lease of five beats
		Logger: logs.Logger(slog.LevelInfo),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	d, err := datadriver.NewDriver(n, datadriver.Config[bag]{Name: "PlayerData", Autosave: -1, LockWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*datadriver.Profile[bag]
	for i := range 40 {
		p, err := d.Join(context.Background(), fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, p)
	}
	rr.PauseReplica(t, 0) // WAIT times out: every durable write holds a connection 300 ms
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var cycles, notReplicated atomic.Int64
	for _, p := range sessions {
		wg.Go(func() {
			for ctx.Err() == nil && p.Err() == nil { // an ended session would spin, and starve the beat of CPU
				_ = p.Update(func(b *bag) { b.Coins++ })
				if err := p.Save(ctx); errors.Is(err, datadriver.ErrNotReplicated) {
					notReplicated.Add(1)
				}
				cycles.Add(1)
			}
		})
	}
	wg.Wait()
	rr.ResumeReplica(t, 0)
	t.Logf("%d saves, %d of them not replicated, in 4 s", cycles.Load(), notReplicated.Load())
	if notReplicated.Load() == 0 {
		t.Fatal("no durable write waited for the paused replica: the test tested nothing")
	}
	if err := n.Healthy(); err != nil {
		t.Errorf("Healthy after the replica waits = %v", err)
	}
	if strings.Contains(logs.String(), "presence lease lapsed") {
		t.Errorf("the server fenced itself while only its replica was slow:\n%s", logs.String())
	}

	// Every connection of the pool held by other work for two presence
	// TTLs: saves wait for a connection (and may fail); the beats go on.
	var held sync.WaitGroup
	for range 4 {
		held.Go(func() { _ = rdb.BLPop(context.Background(), 3*time.Second, rr.Key("nothing")).Err() })
	}
	held.Wait()
	if err := n.Healthy(); err != nil {
		t.Errorf("Healthy after the pool was held for 3 s = %v", err)
	}
	if strings.Contains(logs.String(), "presence lease lapsed") {
		t.Errorf("the server fenced itself while its records' pool was held:\n%s", logs.String())
	}
	if err := sessions[0].Update(func(*bag) {}); err != nil {
		t.Errorf("a session after the pool was held: %v", err)
	}
}
