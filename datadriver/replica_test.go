package datadriver_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
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
	rk := datadriver.RecordKey(rr.Namespace, "PlayerData", "user:1")

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
		tok, _ := rr.Client(t).HGet(ctx, datadriver.RecordKey(rr.Namespace, "PlayerData", "user:3"), "lock.token").Result()
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
	rk := datadriver.RecordKey(rr.Namespace, "PlayerData", "user:3")
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
