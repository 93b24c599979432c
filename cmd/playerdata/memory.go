package main

// The Redis memory line of playerdata presence: the eviction policy and the
// memory headroom, as the Nodes read them at start and every minute.

import (
	"context"
	"fmt"
	"io"

	"github.com/ckernel/playerdata/internal/redismem"
)

// memoryReport is what Redis may do when its memory fills.
type memoryReport struct {
	// Policy is maxmemory-policy (on a Cluster, the master's that evicts
	// most); Evicts says what it may evict: "records" (allkeys-*, the
	// library's records included: a Node refuses to start on it unless
	// NodeConfig.AcceptEviction), "keys with a TTL" (volatile-*), "nothing".
	Policy string `json:"policy"`
	Evicts string `json:"evicts"`
	// UsedBytes and LimitBytes are used_memory and maxmemory (0: no limit)
	// of the fullest master; HeadroomBytes is what is left (absent without
	// a limit).
	UsedBytes     int64  `json:"used_bytes"`
	LimitBytes    int64  `json:"limit_bytes"`
	HeadroomBytes *int64 `json:"headroom_bytes,omitempty"`
	// Err says why the policy could not be read (a proxy or managed Redis
	// without INFO memory and CONFIG).
	Err string `json:"error,omitempty"`
}

// readMemory reads the policy and headroom of every master of r.
func (r *reader) readMemory(ctx context.Context) *memoryReport {
	m, err := redismem.Read(ctx, r.rdb)
	if err != nil {
		return &memoryReport{Err: err.Error()}
	}
	rep := &memoryReport{Policy: m.Policy, UsedBytes: m.Used, LimitBytes: m.Limit, Evicts: "nothing"}
	switch {
	case m.EvictsRecords():
		rep.Evicts = "records"
	case m.Evicting:
		rep.Evicts = "keys with a TTL"
	}
	if left, ok := m.Headroom(); ok {
		rep.HeadroomBytes = &left
	}
	return rep
}

// printMemory prints the memory line for people.
func printMemory(w io.Writer, st style, m *memoryReport) {
	if m == nil {
		return
	}
	if m.Err != "" {
		fmt.Fprintln(w, "  "+st.yellow("redis memory: "+m.Err+"; make sure maxmemory-policy is noeviction"))
		return
	}
	room := "no maxmemory limit"
	if m.HeadroomBytes != nil {
		room = fmt.Sprintf("%s of %s used, %s left", bytesHuman(m.UsedBytes), bytesHuman(m.LimitBytes),
			bytesHuman(*m.HeadroomBytes))
	} else if m.UsedBytes > 0 {
		room = bytesHuman(m.UsedBytes) + " used, no maxmemory limit"
	}
	line := fmt.Sprintf("redis memory: maxmemory-policy %s, %s", m.Policy, room)
	switch m.Evicts {
	case "records":
		fmt.Fprintln(w, "  "+st.red(line+": it may evict records (an evicted record reads as a new profile); "+
			"Nodes refuse it unless NodeConfig.AcceptEviction"))
	case "keys with a TTL":
		fmt.Fprintln(w, "  "+st.yellow(line+": it evicts keys with a TTL (none the library needs); a full Redis refuses saves"))
	default:
		fmt.Fprintln(w, "  "+line)
	}
}

// bytesHuman is n bytes in B, KiB, MiB or GiB.
func bytesHuman(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	}
	return fmt.Sprintf("%d B", n)
}
