package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// A primary killed with -9 while 50 players save as fast as they can, and a
// replica promoted by Sentinel, with the replicas in step and with the
// replicas held behind (paused, their links dropped) for at least 300 ms and
// until every player's save landed once more on the primary alone: with
// MinReplicas 1 no save that returned nil is lost (a save the replicas did
// not acknowledge says so, with ErrNotReplicated); without it, the saves of
// the replicas' lag are lost although they returned nil (held behind, the
// players stop before the kill, so that no save after the promotion writes
// over what was lost).
func TestSentinelPromotionAndAcknowledgedSaves(t *testing.T) {
	for _, behind := range []bool{false, true} {
		for _, minReplicas := range []int{0, 1} {
			t.Run(fmt.Sprintf("replicas behind %t, MinReplicas %d", behind, minReplicas), func(t *testing.T) {
				lost, acked := promoteUnderSaves(t, minReplicas, behind)
				t.Logf("README | Sentinel promotion after kill -9 of the primary, 50 players saving, replicas held "+
					"behind %t | MinReplicas %d | %d of %d keys lost their last acknowledged save", behind, minReplicas,
					lost, acked)
				switch {
				case minReplicas > 0 && lost > 0:
					t.Errorf("%d of %d keys lost a save that returned nil with MinReplicas %d", lost, acked, minReplicas)
				case minReplicas == 0 && behind && lost == 0:
					t.Errorf("no save lost with the replicas behind and no MinReplicas: the test tested nothing")
				}
			})
		}
	}
}

// promoteUnderSaves runs the scenario and reports how many keys lost their
// last acknowledged save, of how many had one.
func promoteUnderSaves(t *testing.T, minReplicas int, behind bool) (lost, acked int) {
	sn := testsupport.StartSentinel(t, testsupport.SentinelConfig{Replicas: 2})
	logs := &testsupport.LogBuffer{}
	n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{JobID: "server-a", Redis: sn.Client(t),
		Namespace: sn.Namespace, MinReplicas: minReplicas, ReplicaTimeout: 500 * time.Millisecond,
		Logger: logs.Logger(slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	d, err := datadriver.NewDriver(n, datadriver.Config[player]{Name: "PlayerData", Autosave: -1})
	if err != nil {
		t.Fatal(err)
	}
	const players = 50
	last := make([]int, players) // the last Coins a Save acknowledged (nil)
	// Once the replicas are behind: the players whose save, begun since,
	// landed on the primary (nil, or ErrNotReplicated with MinReplicas).
	var lagging atomic.Bool
	landedInLag := make([]atomic.Bool, players)
	var nLanded atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range players {
		p, err := d.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for c := 1; ctx.Err() == nil; c++ {
				if p.Update(func(pl *player) { pl.Coins = c }) != nil {
					return
				}
				inLag := lagging.Load()
				// Long enough to wait its turn for a replica wait (half the
				// pool waits at once, each up to ReplicaTimeout): a save
				// whose context ends in the queue has an unknown outcome.
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				err := p.Save(sctx)
				scancel()
				if err == nil {
					last[i] = c
				}
				if inLag && (err == nil || errors.Is(err, datadriver.ErrNotReplicated)) && landedInLag[i].CompareAndSwap(false, true) {
					nLanded.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	if behind {
		sn.LoseReplication(t)
		lagging.Store(true)
		time.Sleep(300 * time.Millisecond)
		// A loaded machine may land few saves in 300 ms: the lag lasts
		// until every player's save landed on the primary alone (with
		// MinReplicas, half the pool waits out ReplicaTimeout at a time).
		deadline := time.Now().Add(20 * time.Second)
		for nLanded.Load() < players && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if nLanded.Load() == 0 {
			t.Fatal("no save landed on the primary while the replicas were behind")
		}
		// The players stop before the kill: a save after the promotion
		// writes the profile's newer data to the promoted replica (its lock
		// token is there) and would hide the lag's lost save, as it did once
		// when the client found the new primary within the 500 ms below.
		cancel()
		wg.Wait()
	}
	sn.KillPrimary(t)
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	rdb := sn.Client(t)
	for i := range players {
		if last[i] == 0 {
			continue
		}
		acked++
		raw, err := rdb.HGet(context.Background(), record.Key(sn.Namespace, "PlayerData", fmt.Sprintf("user:%d", i)), "data").Result()
		var got player
		if err == nil {
			err = msgpack.Unmarshal([]byte(raw), &got)
		}
		if err != nil || got.Coins < last[i] {
			lost++
		}
	}
	return lost, acked
}
