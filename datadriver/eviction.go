package datadriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/telemetry"
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
type redisMemory = telemetry.RedisMemory

// evictsRecords reports whether policy may evict keys without a TTL.
func evictsRecords(policy string) bool { return strings.HasPrefix(policy, "allkeys-") }

// evictsSome reports whether policy evicts keys at all.
func evictsSome(policy string) bool {
	return evictsRecords(policy) || strings.HasPrefix(policy, "volatile-")
}

// memoryWatch is a Node's view of Redis's memory policy.
type memoryWatch struct {
	mu     sync.Mutex
	last   redisMemory
	warned string // the policy last warned about
}

// readRedisMemory reads maxmemory-policy, used_memory and maxmemory from
// every master of rdb.
func readRedisMemory(ctx context.Context, rdb redis.UniversalClient) (redisMemory, error) {
	var mu sync.Mutex
	var out redisMemory
	read := func(ctx context.Context, c *redis.Client) error {
		m, err := readOne(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !out.Known || rank(m.Policy) > rank(out.Policy) {
			out.Policy, out.Evicting = m.Policy, m.Evicting
		}
		if !out.Known || m.Used > out.Used {
			out.Used, out.Limit = m.Used, m.Limit
		}
		out.Known = true
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, read)
		return out, err
	}
	c, ok := rdb.(*redis.Client)
	if !ok {
		m, err := readOne(ctx, rdb)
		return m, err
	}
	err := read(ctx, c)
	return out, err
}

// rank orders policies by what they may evict.
func rank(policy string) int {
	switch {
	case evictsRecords(policy):
		return 2
	case evictsSome(policy):
		return 1
	}
	return 0
}

// readOne reads one server's memory policy: INFO memory, else CONFIG GET.
func readOne(ctx context.Context, c redis.Cmdable) (redisMemory, error) {
	info, err := c.Info(ctx, "memory").Result()
	m := redisMemory{}
	if err == nil {
		m.Policy = infoValue(info, "maxmemory_policy")
		m.Used, _ = strconv.ParseInt(infoValue(info, "used_memory"), 10, 64)
		m.Limit, _ = strconv.ParseInt(infoValue(info, "maxmemory"), 10, 64)
	}
	if m.Policy == "" {
		cfg, cerr := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if cerr != nil {
			return m, fmt.Errorf("read the eviction policy: INFO memory: %v; CONFIG GET: %w", err, cerr)
		}
		m.Policy = cfg["maxmemory-policy"]
		if m.Policy == "" {
			return m, errors.New("read the eviction policy: neither INFO memory nor CONFIG GET names it")
		}
	}
	m.Known, m.Evicting = true, evictsSome(m.Policy)
	return m, nil
}

// unsupported reports whether err says the server has no such command or
// section (rather than that it failed).
func unsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown command") || strings.Contains(s, "not supported")
}

// infoValue is field name of an INFO answer ("" when absent).
func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// checkEviction reads the policy at start-up: an allkeys-* policy is
// refused unless the operator accepts it; volatile-* is logged.
func (n *Node) checkEviction(ctx context.Context) error {
	rctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	m, err := readRedisMemory(rctx, n.rdb)
	if err != nil {
		level := slog.LevelWarn
		if unsupported(err) {
			level = slog.LevelInfo // a server without INFO memory and CONFIG (an in-process one, a proxy)
		}
		n.log.Log(ctx, level, "could not read Redis's eviction policy; make sure it is noeviction (an evicted "+
			"record reads as a new profile)", "err", err)
		return nil
	}
	if evictsRecords(m.Policy) && !n.cfg.AcceptEviction {
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
	case evictsRecords(m.Policy):
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
	if m := n.memory.last; m.Known && evictsRecords(m.Policy) && !n.cfg.AcceptEviction {
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
		m, err := readRedisMemory(ctx, n.rdb)
		cancel()
		if err == nil {
			n.noteMemory(m)
		}
	}
}
