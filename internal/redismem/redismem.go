// Package redismem reads what Redis may do when its memory fills: the
// eviction policy (maxmemory-policy), the memory used and the limit, from
// every master. A Redis that may evict the library's keys loses players'
// data silently (an evicted record reads as a new profile), so the Node
// refuses to start on one and the operator CLI reports it.
package redismem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Memory is what one read of Redis's memory found: on a Cluster, the
// policy that evicts most and the fullest master.
type Memory struct {
	// Known is false until a read succeeded.
	Known bool
	// Policy is maxmemory-policy; Used and Limit are used_memory and
	// maxmemory, in bytes (Limit 0: none).
	Policy      string
	Used, Limit int64
	// Evicting: the policy may evict keys.
	Evicting bool
}

// EvictsRecords reports whether the policy may evict keys without a TTL,
// such as the library's records (allkeys-*).
func (m Memory) EvictsRecords() bool { return EvictsRecords(m.Policy) }

// Headroom is the memory left before the limit, in bytes, and whether
// there is a limit at all.
func (m Memory) Headroom() (int64, bool) {
	if m.Limit <= 0 {
		return 0, false
	}
	return m.Limit - m.Used, true
}

// EvictsRecords reports whether policy may evict keys without a TTL.
func EvictsRecords(policy string) bool { return strings.HasPrefix(policy, "allkeys-") }

// EvictsSome reports whether policy evicts keys at all.
func EvictsSome(policy string) bool {
	return EvictsRecords(policy) || strings.HasPrefix(policy, "volatile-")
}

// Read reads maxmemory-policy, used_memory and maxmemory from every master
// of rdb: INFO memory, which managed Redis answers where CONFIG is
// disabled, else CONFIG GET maxmemory-policy.
func Read(ctx context.Context, rdb redis.UniversalClient) (Memory, error) {
	var mu sync.Mutex
	var out Memory
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
		return readOne(ctx, rdb)
	}
	err := read(ctx, c)
	return out, err
}

// Unsupported reports whether err, from Read, says the server has no such
// command or section (an in-process Redis, a proxy) rather than that it
// failed.
func Unsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown command") || strings.Contains(s, "not supported")
}

// rank orders policies by what they may evict.
func rank(policy string) int {
	switch {
	case EvictsRecords(policy):
		return 2
	case EvictsSome(policy):
		return 1
	}
	return 0
}

// readOne reads one server's memory policy: INFO memory, else CONFIG GET.
func readOne(ctx context.Context, c redis.Cmdable) (Memory, error) {
	info, err := c.Info(ctx, "memory").Result()
	m := Memory{}
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
	m.Known, m.Evicting = true, EvictsSome(m.Policy)
	return m, nil
}

// infoValue is field name of an INFO answer ("" when absent).
func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
