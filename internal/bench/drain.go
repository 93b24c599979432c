package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// Drain is Node.Drain of one server's players to two peers (Profile.MoveTo
// each, 64 at once): from the call to its return, every
// profile held by a peer.
type Drain struct {
	Players int            `json:"players"`
	MS      float64        `json:"ms"`
	Moved   map[string]int `json:"moved"` // by peer (bench-b, bench-c)
	Failed  int            `json:"failed"`
}

// runDrain joins cfg.DrainPlayers profiles on one server and drains them to
// two peers.
func (r *runner) runDrain(ctx context.Context) error {
	ns := r.ns("drain")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	suffix := randomID()
	var servers [3]*handoffServer
	for i, job := range []string{"bench-a-", "bench-b-", "bench-c-"} {
		s, err := r.startServer(ctx, ns, job+suffix, nil, func(c *datadriver.Config[profileData]) { c.Autosave = -1 })
		if err != nil {
			return err
		}
		defer s.close(ctx)
		servers[i] = s
	}
	n := drainPlayers
	for i := range n {
		if _, err := servers[0].drv.Join(ctx, "d"+strconv.Itoa(i)); err != nil {
			return fmt.Errorf("drain: join %d: %w", i, err)
		}
	}
	start := time.Now()
	res, err := servers[0].node.Drain(ctx, datadriver.DrainOptions{})
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	d := &r.res.Drain
	d.Players, d.MS, d.Failed = n, round3(msOf(took)), res.Failed
	d.Moved = map[string]int{}
	for job, k := range res.Moved {
		d.Moved[job[:len("bench-b")]] = k
	}
	r.progress("  drained %d players to two peers in %.0f ms (%v, %d failed)", n, d.MS, d.Moved, d.Failed)
	return nil
}

// drainPlayers is how many players a drain moves.
const drainPlayers = 2000
