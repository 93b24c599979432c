package main

// Bounded SCANs: the only way to find records without knowing their keys,
// and to tell a namespace that holds nothing (a typo) from one whose key
// was never loaded. Each SCAN call examines about scanCount keys, so Redis
// never blocks for long, and a scan stops after about a limit of keys
// examined and says so.

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/labenv"
)

const (
	// scanCount is the COUNT of one SCAN call: enough keys per round trip
	// to scan a million keys in about a thousand calls, few enough that one
	// call holds Redis for well under a millisecond.
	scanCount = 1000
	// defaultScanLimit bounds a scan to about this many keys examined: a
	// second or two on a busy Redis.
	defaultScanLimit = 100_000
)

// scanStats says how much of the keyspace a scan covered.
type scanStats struct {
	// Examined is about how many keys Redis looked at: the sum of the calls'
	// COUNT, or the database's size once the scan completed.
	Examined int `json:"examined"`
	// Matched is how many distinct keys matched the pattern.
	Matched int `json:"matched"`
	// DBSize is the number of keys in the database when the scan began
	// (summed over the masters).
	DBSize int64 `json:"db_size"`
	// Masters is how many masters were scanned: every master of a Redis
	// Cluster, else 1.
	Masters int `json:"masters"`
	// Complete is true when the scan went through the whole keyspace of
	// every master: every key that existed throughout was seen.
	Complete bool `json:"complete"`
	// Cut is true when the limit stopped the scan before it completed.
	Cut bool `json:"cut_by_limit"`
}

// scanFunc receives each batch of keys not seen before and the node that
// serves them; stop ends the scan.
type scanFunc func(node redis.Cmdable, keys []string) (stop bool, err error)

// scan runs SCAN MATCH pattern over the keyspace of every master in turn
// (a Redis Cluster's SCAN sees one node's keys only), calling fn with each
// batch of fresh keys, until every master's scan completes, about limit
// keys have been examined in all (Cut), or fn answers stop. Each call is
// bounded by ctx.
func (r *reader) scan(ctx context.Context, pattern string, limit int, fn scanFunc) (scanStats, error) {
	nodes, err := r.masters(ctx)
	if err != nil {
		return scanStats{}, err
	}
	st := scanStats{Masters: len(nodes)}
	sizes := make([]int64, len(nodes))
	for i, n := range nodes {
		if sizes[i], err = n.DBSize(ctx).Result(); err != nil {
			return st, fmt.Errorf("dbsize: %w", err)
		}
		st.DBSize += sizes[i]
	}
	for i, n := range nodes {
		before := st.Examined
		done, stop, err := scanNode(ctx, n, pattern, limit, &st, fn)
		if err != nil || stop {
			return st, err
		}
		if !done {
			st.Cut = true
			return st, nil
		}
		// A master scanned to the end examined its keys, not the COUNTs.
		st.Examined = before + int(sizes[i])
	}
	st.Complete = true
	st.Examined = int(max(st.DBSize, int64(st.Matched)))
	return st, nil
}

// scanNode scans one node for scan, adding to st; done says its scan
// completed within the limit.
func scanNode(ctx context.Context, node redis.Cmdable, pattern string, limit int, st *scanStats, fn scanFunc) (done, stop bool, err error) {
	seen := make(map[string]struct{})
	var cursor uint64
	for {
		if st.Examined >= limit {
			return false, false, nil
		}
		count := min(scanCount, limit-st.Examined)
		keys, next, err := node.Scan(ctx, cursor, pattern, int64(count)).Result()
		if err != nil {
			return false, false, fmt.Errorf("scan %s: %w", pattern, err)
		}
		st.Examined += count
		fresh := keys[:0]
		for _, k := range keys {
			if _, dup := seen[k]; !dup { // SCAN may return a key twice
				seen[k] = struct{}{}
				fresh = append(fresh, k)
			}
		}
		st.Matched += len(fresh)
		if len(fresh) > 0 {
			if stop, err := fn(node, fresh); err != nil || stop {
				return false, stop, err
			}
		}
		if next == 0 {
			return true, false, nil
		}
		cursor = next
	}
}

// recordPattern matches the records of driver under ns,
// "<ns>:{<driver>:*}", or of every driver when driver is "" .
func recordPattern(ns, driver string) string {
	p := "{*}"
	if driver != "" {
		p = "{" + labenv.GlobEscape(driver) + ":*}"
	}
	if ns == "" {
		return p
	}
	return labenv.GlobEscape(ns) + ":" + p
}

// parseRecordKey splits a record's Redis key, "<ns>:{<driver>:<key>}", into
// its driver and profile key. With driver "" the driver is read up to the
// first colon (a driver name with a colon is then split wrong: pass
// --driver).
func parseRecordKey(ns, driver, rk string) (drv, key string, ok bool) {
	if ns != "" {
		if rk, ok = strings.CutPrefix(rk, ns+":"); !ok {
			return "", "", false
		}
	}
	inner, ok := strings.CutPrefix(rk, "{")
	if !ok {
		return "", "", false
	}
	if inner, ok = strings.CutSuffix(inner, "}"); !ok {
		return "", "", false
	}
	if driver != "" {
		key, ok = strings.CutPrefix(inner, driver+":")
		return driver, key, ok
	}
	drv, key, ok = strings.Cut(inner, ":")
	return drv, key, ok
}
