package datadriver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/redismem"
)

// A Redis that may evict the library's keys loses players' data silently:
// an evicted record reads as a new one (its next Join gets Defaults), an
// evicted presence hash looks like a restart. NewNode reads the eviction
// policy (INFO memory, which managed Redis answers where CONFIG is
// disabled; CONFIG GET maxmemory-policy when INFO lacks it) and refuses an
// allkeys-* policy unless NodeConfig.AcceptEviction says the operator
// accepts the loss; under volatile-* it warns once (only keys with a TTL
// go, and no key the library needs for safety carries one: a trade journal
// entry has a TTL only while PREPARED, when losing it aborts the trade, and
// after it settled). The Node looks again every minute, reports a policy
// that may evict through Healthy and logs a change once; the metrics carry
// the policy and the memory used and allowed.

// evictionCheckEvery is how often a Node reads Redis's memory policy.
const evictionCheckEvery = time.Minute

// redisMemory is what a Node last read of Redis's memory: on a Cluster,
// the policy that evicts most and the fullest master.
type redisMemory = redismem.Memory

// memoryWatch is a Node's view of Redis's memory policy.
type memoryWatch struct {
	mu     sync.Mutex
	last   redisMemory
	warned string // the policy last warned about
}

// checkEviction reads the policy at start-up: an allkeys-* policy is
// refused unless the operator accepts it; volatile-* is logged.
func (n *Node) checkEviction(ctx context.Context) error {
	rctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	m, err := redismem.Read(rctx, n.rdb)
	if err != nil {
		level := slog.LevelWarn
		if redismem.Unsupported(err) {
			level = slog.LevelInfo // a server without INFO memory and CONFIG (an in-process one, a proxy)
		}
		n.log.Log(ctx, level, "could not read Redis's eviction policy; make sure it is noeviction (an evicted "+
			"record reads as a new profile)", "err", err)
		return nil
	}
	if m.EvictsRecords() && !n.cfg.AcceptEviction {
		return fmt.Errorf("start node %s: %w: the policy is %s: an evicted record reads as a new profile, "+
			"whose next Join gets Defaults. Set maxmemory-policy noeviction (writes then fail with OOM "+
			"instead, and no data is lost), or set NodeConfig.AcceptEviction to accept the loss", n.jobID,
			ErrEvictionPolicy, m.Policy)
	}
	n.noteMemory(m)
	return nil
}

// noteMemory records what a read found and logs a policy that may evict,
// once per policy.
func (n *Node) noteMemory(m redisMemory) {
	n.memory.mu.Lock()
	n.memory.last = m
	warn := m.Evicting && n.memory.warned != m.Policy
	if warn {
		n.memory.warned = m.Policy
	}
	n.memory.mu.Unlock()
	switch {
	case !warn:
	case m.EvictsRecords():
		n.log.Error("Redis's maxmemory-policy may evict the library's records: an evicted record reads as a "+
			"new profile (its player's next Join gets Defaults)", "policy", m.Policy, "accepted", n.cfg.AcceptEviction)
	default:
		n.log.Warn("Redis's maxmemory-policy evicts keys that carry a TTL: none the library needs for safety "+
			"carries one, but a full Redis refuses writes (saves fail with OOM)", "policy", m.Policy)
	}
}

// memoryErr is Healthy's word on the policy: ErrEvictionPolicy while it may
// evict records and the operator did not accept it.
func (n *Node) memoryErr() error {
	n.memory.mu.Lock()
	defer n.memory.mu.Unlock()
	if m := n.memory.last; m.Known && m.EvictsRecords() && !n.cfg.AcceptEviction {
		return fmt.Errorf("%w: the policy is %s", ErrEvictionPolicy, m.Policy)
	}
	return nil
}

// lastMemory is the last read (the metrics' source).
func (n *Node) lastMemory() redisMemory {
	n.memory.mu.Lock()
	defer n.memory.mu.Unlock()
	return n.memory.last
}

// watchMemory reads the policy every evictionCheckEvery until the Node
// closes (a CONFIG SET at run time is seen within a minute).
func (n *Node) watchMemory() {
	defer n.watchers.Done()
	t := n.clock.Ticker(evictionCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := n.clock.WithTimeout(n.ctx, n.cfg.SaveTimeout)
		m, err := redismem.Read(ctx, n.rdb)
		cancel()
		if err == nil {
			n.noteMemory(m)
		}
	}
}
