package datadriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/sameredis"
)

// Presence and records must live in one dataset: a beat written where the
// records are not is a beat no peer reads, and a peer would prove a live
// server stopped and take its locks. NewNode proves it (a value written
// through the presence client under each presence shard's slot reads back
// through the Redis client) before it claims the JobID, and refuses a
// client on another server, another DB number, another Cluster or another
// Sentinel primary with ErrInvalidConfig naming both. The proof is kept:
// whenever either client connects to a server it had not connected to
// before (a failover, a changed DNS answer), every presence call waits for a
// new proof and fails while it fails, so no beat renews the lease and the
// server fences itself FenceMargin before a peer could read it stopped;
// the proof is tried again every Beat, and the next beat after it stands
// starts a new lease.

// checkDataset proves at start that the presence client and the Redis
// client reach one dataset, and keeps the proof (sameredis.Guard).
func (n *Node) checkDataset(ctx context.Context) error {
	name := "NodeConfig.PresenceRedis"
	if n.cfg.PresenceRedis == nil {
		name = "the presence client made from NodeConfig.Redis's options"
	}
	n.dataset = sameredis.New(sameredis.Config{
		Records: n.rdb, Presence: n.prdb, RecordsName: "NodeConfig.Redis", PresenceName: name,
		Keys: n.presence.Keys(), Retry: n.presence.Config().Beat, Clock: n.clock, Logger: n.log,
	})
	cctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	err := n.dataset.Check(cctx)
	var mismatch *sameredis.MismatchError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mismatch):
		return fmt.Errorf("start node %s: %w: %w", n.jobID, ErrInvalidConfig, err)
	case ctx.Err() != nil:
		return fmt.Errorf("start node %s: %w", n.jobID, ctx.Err())
	}
	n.log.Warn("presence and records could not be proven to be on one dataset yet; presence calls wait for the "+
		"proof, which is tried again every Beat", "err", err)
	return nil
}
