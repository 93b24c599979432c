package main

// Bounded SCANs: the only way to find records without knowing their keys,
// and to tell a namespace that holds nothing (a typo) from one whose key
// was never loaded. Each SCAN call examines about scanCount keys, so Redis
// never blocks for long, and a scan stops after about a limit of keys
// examined and says so.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/redis/go-redis/v9"
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
	// DBSize is the number of keys in the database when the scan began.
	DBSize int64 `json:"db_size"`
	// Complete is true when the scan went through the whole keyspace: every
	// key that existed throughout was seen.
	Complete bool `json:"complete"`
	// Cut is true when the limit stopped the scan before it completed.
	Cut bool `json:"cut_by_limit"`
}

// scanKeys runs SCAN MATCH pattern over the keyspace, calling fn with each
// batch of keys not seen before, until the scan completes, about limit keys
// have been examined (Cut), or fn answers stop. Each call is bounded by ctx.
func scanKeys(ctx context.Context, rdb redis.Cmdable, pattern string, limit int,
	fn func(keys []string) (stop bool, err error)) (scanStats, error) {
	var st scanStats
	size, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return st, fmt.Errorf("dbsize: %w", err)
	}
	st.DBSize = size
	seen := make(map[string]struct{})
	var cursor uint64
	for {
		if st.Examined >= limit {
			st.Cut = true
			return st, nil
		}
		count := min(scanCount, limit-st.Examined)
		keys, next, err := rdb.Scan(ctx, cursor, pattern, int64(count)).Result()
		if err != nil {
			return st, fmt.Errorf("scan %s: %w", pattern, err)
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
		if next == 0 {
			st.Complete = true
			st.Examined = int(max(st.DBSize, int64(st.Matched)))
		}
		if len(fresh) > 0 {
			if stop, err := fn(fresh); err != nil || stop {
				return st, err
			}
		}
		if st.Complete {
			return st, nil
		}
		cursor = next
	}
}

// recordPattern matches the records of driver under ns,
// "<ns>:{<driver>:*}", or of every driver when driver is "" (globEscape is
// demo.go's).
func recordPattern(ns, driver string) string {
	p := "{*}"
	if driver != "" {
		p = "{" + globEscape(driver) + ":*}"
	}
	if ns == "" {
		return p
	}
	return globEscape(ns) + ":" + p
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

// nsState is what a namespace was found to hold.
type nsState int

const (
	// nsInUse: the presence hash exists, or a record was found.
	nsInUse nsState = iota
	// nsEmpty: no presence hash, and a complete scan found no record.
	nsEmpty
	// nsUnsure: no presence hash, and no record among the keys examined
	// before the limit.
	nsUnsure
)

// namespaceState tells a namespace in use from one that holds nothing at
// all: no presence hash, and no record of any driver (a bounded SCAN, about
// limit keys examined at most).
func (r *reader) namespaceState(ctx context.Context, limit int) (nsState, scanStats, error) {
	if ok, err := r.presenceHashExists(ctx); err != nil || ok {
		return nsInUse, scanStats{}, err
	}
	found := false
	st, err := scanKeys(ctx, r.rdb, recordPattern(r.ns, ""), limit, func([]string) (bool, error) {
		found = true
		return true, nil
	})
	switch {
	case err != nil:
		return nsInUse, st, err
	case found:
		return nsInUse, st, nil
	case st.Complete:
		return nsEmpty, st, nil
	}
	return nsUnsure, st, nil
}

// checkNamespace returns a usage error when the namespace holds nothing at
// all (status 2), and writes a warning to stderr when a scan cut short
// found nothing either.
func (r *reader) checkNamespace(ctx context.Context, limit int, stderr io.Writer) error {
	state, st, err := r.namespaceState(ctx, limit)
	switch {
	case err != nil:
		return err
	case state == nsEmpty:
		return emptyNamespaceError(r.ns)
	case state == nsUnsure:
		fmt.Fprintf(stderr, "playerdata: warning: no presence hash %s, and no record of namespace %q among the first %d keys "+
			"examined (of %d): is the namespace right?\n", r.presKey, r.ns, st.Examined, st.DBSize)
	}
	return nil
}

// emptyNamespaceError is the one line a namespace that holds nothing gets.
func emptyNamespaceError(ns string) error {
	if ns == "" {
		return usagef("no namespace given, and Redis has no records and no servers outside a namespace: is --namespace missing?")
	}
	return usagef("namespace %q has no records and no servers: is the namespace right?", ns)
}
