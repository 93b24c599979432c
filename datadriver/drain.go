package datadriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// A drain moves every live session of a Node to its live peers (MoveTo)
// instead of releasing it: a rolling deploy or a scale-in keeps its
// players playing, each told where to go.

// drainParallel is how many moves a drain runs at once: enough to
// overlap the round trips of a few thousand players, few enough not to
// crowd the Node's Redis pool.
const drainParallel = 64

// DrainOptions tune Node.Drain.
type DrainOptions struct {
	// OnMoved is called on the drain's goroutines for each profile that
	// moved, with the JobID of its new server: redirect the player there.
	// Parallel bounds the moves running at once.
	// default: nil, 64
	OnMoved  func(driver, key, to string)
	Parallel int
}

// DrainResult says what a drain did.
type DrainResult struct {
	// Moved counts the profiles that moved, by target JobID; Failed the
	// ones that did not (still live here: Close releases them).
	Moved  map[string]int
	Failed int
}

// drainPeers hands out targets: the live peers of the presence's session
// counts, each pick going to the least loaded counting the profiles this
// drain sent it, so that the players spread by load. With quotas (the
// drain's reservation) a peer takes no more than its quota.
type drainPeers struct {
	mu     sync.Mutex
	load   map[string]int
	order  []string
	quotas map[string]int // nil: no reservation
}

// pick is the least loaded peer with quota left, counted one more; the
// least loaded of all once every quota is spent; "" when none.
func (dp *drainPeers) pick() string {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	best := ""
	for _, j := range dp.order {
		if dp.quotas != nil && dp.quotas[j] <= 0 {
			continue
		}
		if best == "" || dp.load[j] < dp.load[best] {
			best = j
		}
	}
	if best == "" {
		for _, j := range dp.order {
			if best == "" || dp.load[j] < dp.load[best] {
				best = j
			}
		}
	}
	if best != "" {
		dp.load[best]++
		if dp.quotas != nil {
			dp.quotas[best]--
		}
	}
	return best
}

// drop takes peer out of the drain's targets (it refused as closing or
// draining).
func (dp *drainPeers) drop(peer string) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if i := slices.Index(dp.order, peer); i >= 0 && len(dp.order) > 1 {
		dp.order = slices.Delete(dp.order, i, i+1)
	}
}

// reserve places the drain's count profiles among the peers against the
// other drains' live holds (drainhold.lua, one round trip) and holds them
// until the drain's deadline plus one PresenceTTL, by when the peers' beats
// count what arrived: concurrent drains do not pile onto one peer. A
// failed reservation is logged and the drain goes on by the counts alone.
func (n *Node) reserve(ctx context.Context, dp *drainPeers, count int) {
	hold := defaultDrainHold
	if dl, ok := ctx.Deadline(); ok {
		hold = min(max(dl.Sub(n.clock.Now()), 0), maxDrainHold)
	}
	hold += n.cfg.PresenceTTL
	peers := make([]record.PeerLoad, 0, len(dp.order))
	for _, j := range dp.order {
		peers = append(peers, record.PeerLoad{JobID: j, Sessions: dp.load[j]})
	}
	rctx, cancel := n.clock.WithTimeout(ctx, n.cfg.SaveTimeout)
	defer cancel()
	quotas, err := record.DrainHold(rctx, n.rdb, n.ns, record.DrainHoldArgs{Drainer: n.jobID, TTL: hold, N: count, Peers: peers})
	if err != nil {
		n.log.Warn("drain: the headroom reservation failed; placing by the session counts alone", "err", err)
		return
	}
	dp.quotas = quotas
}

// The bounds of a drain's hold when its ctx has no deadline, and at most.
const (
	defaultDrainHold = 30 * time.Second
	maxDrainHold     = 5 * time.Minute
)

// Drain moves every live session of every driver to the live peers that
// publish a session count in presence, least loaded first, at most
// opts.Parallel at once, calling opts.OnMoved for each (docs/handoff.md,
// "Draining to peers"). A profile whose move fails stays live here (Close
// releases it); with no live peer it fails and moves nothing. ctx bounds the
// whole drain. Call it before Close, once the game sends no new players here.
func (n *Node) Drain(ctx context.Context, opts DrainOptions) (DrainResult, error) {
	res := DrainResult{Moved: map[string]int{}}
	if !n.handoffOn {
		return res, fmt.Errorf("drain: %w: a drain needs the bus (handoff is off)", ErrInvalidConfig)
	}
	n.draining.Store(true) // peers draining meanwhile send nothing here
	defer n.draining.Store(false)
	loads, err := n.presence.Loads(ctx)
	if err != nil && len(loads) == 0 {
		return res, fmt.Errorf("drain: read the peers' loads: %w", err)
	}
	dp := &drainPeers{load: map[string]int{}}
	for _, l := range loads {
		if l.JobID != n.jobID {
			dp.order = append(dp.order, l.JobID)
			dp.load[l.JobID] = l.Sessions
		}
	}
	if len(dp.order) == 0 {
		return res, fmt.Errorf("drain: %w: no live peer publishes a session count", ErrMoveRefused)
	}
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = drainParallel
	}
	n.mu.Lock()
	drivers := n.driversLocked()
	n.mu.Unlock()
	var all [][]mover
	total := 0
	for _, d := range drivers {
		mv := d.movers()
		all, total = append(all, mv), total+len(mv)
	}
	n.reserve(ctx, dp, total)
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, movers := range all {
		for _, mv := range movers {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return res, ctx.Err()
			}
			wg.Go(func() {
				defer func() { <-sem }()
				to := dp.pick()
				err := mv.moveTo(ctx, to)
				var re *MoveRefusedError
				if errors.As(err, &re) && re.Reason == RefusedClosing {
					// A peer closing or draining meanwhile: once more elsewhere.
					dp.drop(to)
					to = dp.pick()
					err = mv.moveTo(ctx, to)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					res.Failed++
					if !errors.Is(err, ErrMoved) {
						n.log.Warn("drain: a profile did not move; it stays here", "driver", mv.driver, "key", mv.key,
							"to", to, "err", err)
					}
					return
				}
				res.Moved[to]++
				if opts.OnMoved != nil {
					opts.OnMoved(mv.driver, mv.key, to)
				}
			})
		}
	}
	wg.Wait()
	return res, ctx.Err()
}

// mover is one live profile a drain may move, whatever its T.
type mover struct {
	driver, key string
	moveTo      func(ctx context.Context, to string) error
}

// movers lists the driver's live sessions.
func (d *Driver[T]) movers() []mover {
	held := d.held()
	out := make([]mover, 0, len(held))
	for _, p := range held {
		if p.phaseNow() == phaseLive {
			out = append(out, mover{driver: d.cfg.Name, key: p.key, moveTo: p.MoveTo})
		}
	}
	return out
}
