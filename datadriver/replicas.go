package datadriver

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
)

// With MinReplicas, a write that must survive a failover waits for replicas
// to acknowledge it: its script and a WAIT go out in one pipeline on one
// connection, which the WAIT holds up to ReplicaTimeout. At most half the
// client's pool waits at once (waitSlots), so a slow replica can make
// durable writes wait for each other but never take every connection; the
// presence beats have a client of their own and never wait for the pool.

// waitSlotsFor is how many replica waits may hold connections of rdb's pool
// at once: half of it, at least one.
func waitSlotsFor(rdb redis.UniversalClient) int {
	size := 0
	switch c := rdb.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize
	}
	if size <= 0 {
		size = 10 // go-redis's smallest default
	}
	return max(1, size/2)
}

// runReplicated runs c and, with MinReplicas, WAITs for replicas in the same
// pipeline, holding one of the Node's wait slots (bounded by ctx). It
// returns the script's answer and how many replicas acknowledged it (0
// without MinReplicas).
func (n *Node) runReplicated(ctx context.Context, c rscript.Call) (any, int64, error) {
	want := n.cfg.MinReplicas
	if want <= 0 {
		v, err := c.Script.Run(ctx, n.locks(), c.Keys, c.Args...).Result()
		return v, 0, err
	}
	select {
	case n.waitSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	defer func() { <-n.waitSlots }()
	return rscript.RunWait(ctx, n.rdb, c, want, n.cfg.ReplicaTimeout)
}

// send runs send.lua, replicated like a durable write (MinReplicas),
// bounded by SaveTimeout (and ReplicaTimeout).
func (n *Node) send(ctx context.Context, key string, body []byte, a record.SendArgs) (record.SendResult, int64, error) {
	ctx, cancel := n.clock.WithTimeout(ctx, n.cfg.SaveTimeout+n.cfg.ReplicaTimeout)
	defer cancel()
	call := record.SendCall(key, body, a)
	v, acked, err := n.runReplicated(ctx, call.Call)
	res, err := call.Answer(v, err)
	return res, acked, err
}
