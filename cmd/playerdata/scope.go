package main

// A namespace or driver named on the command line that holds nothing is
// most often a typo ("playerdata" for "PlayerData"): the commands say so,
// list the namespaces or drivers that do hold records (a bounded scan, like
// locks), and exit with status 2 instead of answering "no record".

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// anyRecordPattern matches the record of every namespace and driver:
// "<ns>:{<driver>:<key>}" and "{<driver>:<key>}", and none of the keys
// beside them (inbox, history, presence shards, owners), which end
// otherwise.
const anyRecordPattern = "*{*:*}"

// splitAnyRecord splits a key matched by anyRecordPattern into its
// namespace and driver (parseRecordKey's split, for any namespace).
func splitAnyRecord(k string) (ns, driver string, ok bool) {
	open := strings.Index(k, "{")
	switch {
	case open < 0:
		return "", "", false
	case open > 0:
		if k[open-1] != ':' {
			return "", "", false
		}
		ns = k[:open-1]
	}
	driver, _, ok = strings.Cut(k[open+1:], ":")
	return ns, driver, ok && driver != ""
}

// scopes lists the namespaces that hold records and the drivers of each,
// from a scan of about limit keys at most.
func (r *reader) scopes(ctx context.Context, limit int) (map[string]map[string]bool, scanStats, error) {
	found := map[string]map[string]bool{}
	st, err := r.scan(ctx, anyRecordPattern, limit, func(_ redis.Cmdable, keys []string) (bool, error) {
		for _, k := range keys {
			if ns, drv, ok := splitAnyRecord(k); ok {
				if found[ns] == nil {
					found[ns] = map[string]bool{}
				}
				found[ns][drv] = true
			}
		}
		return false, nil
	})
	return found, st, err
}

// hasRecord reports whether a record matches pattern, among about limit
// keys examined (the stats say whether the scan went through).
func (r *reader) hasRecord(ctx context.Context, pattern string, limit int) (bool, scanStats, error) {
	found := false
	st, err := r.scan(ctx, pattern, limit, func(redis.Cmdable, []string) (bool, error) {
		found = true
		return true, nil
	})
	return found, st, err
}

// checkScope is asked when a command found nothing: it returns a usage
// error (status 2) listing what exists when the namespace holds no record
// and no presence hash, or when driver ("" for none) has no record in it.
// The status is the same whatever the size of the Redis: when the scan
// (about limit keys) was cut short, the error says so and how to look
// further (--limit), rather than exiting 0 on a large Redis and 2 on a
// small one.
func (r *reader) checkScope(ctx context.Context, driver string, limit int) error {
	inUse, err := r.presenceHashExists(ctx)
	if err != nil {
		return err
	}
	if !inUse {
		found, _, err := r.hasRecord(ctx, recordPattern(r.ns, ""), limit)
		switch {
		case err != nil:
			return err
		case !found:
			return r.scopeError(ctx, limit, emptyNamespace(r.ns), "")
		}
	}
	if driver == "" {
		return nil
	}
	found, _, err := r.hasRecord(ctx, recordPattern(r.ns, driver), limit)
	switch {
	case err != nil:
		return err
	case !found:
		return r.scopeError(ctx, limit, fmt.Sprintf("driver %q has no record in namespace %q", driver, r.ns), driver)
	}
	return nil
}

// scopeError is the usage error of checkScope: what is missing, then the
// drivers that hold records in the reader's namespace, closest to driver
// first, or with driver "" the namespaces that hold records, closest to
// the reader's first.
func (r *reader) scopeError(ctx context.Context, limit int, missing, driver string) error {
	found, st, err := r.scopes(ctx, limit)
	if err != nil {
		return usagef("%s (listing what exists failed: %v)", missing, err)
	}
	scanned := scanText(st)
	if driver != "" {
		names := closest(driver, slices.Collect(maps.Keys(found[r.ns])))
		if len(names) == 0 {
			return usagef("%s, and no driver has (%s)", missing, scanned)
		}
		return usagef("%s; drivers with records there, closest first: %s (%s)", missing, strings.Join(names, ", "), scanned)
	}
	if len(found) == 0 {
		return usagef("%s, and no namespace holds records on this Redis (%s)", missing, scanned)
	}
	var list []string
	for _, n := range closest(r.ns, slices.Collect(maps.Keys(found))) {
		name := fmt.Sprintf("%q", n)
		switch {
		case n == "…":
			name = n
		case n == "":
			name = "none (no --namespace)"
		}
		if d := found[n]; d != nil {
			name += " (drivers " + strings.Join(slices.Sorted(maps.Keys(d)), ", ") + ")"
		}
		list = append(list, name)
	}
	return usagef("%s; namespaces with records, closest first: %s (%s)", missing, strings.Join(list, "; "), scanned)
}

// scanText says what a scan examined, for an error that found nothing.
func scanText(st scanStats) string {
	if st.Cut {
		return fmt.Sprintf("the first %d keys examined of %d: the scan stops there", st.Examined, st.DBSize)
	}
	return fmt.Sprintf("a scan of %d keys on %d %s", st.Examined, st.Masters, plural(st.Masters, "master", "masters"))
}

// maxListed bounds the names a scope error lists.
const maxListed = 8

// closest sorts names by how close they are to want (case-insensitive
// edit distance, then name), keeping maxListed of them; "…" ends a list
// that was cut.
func closest(want string, names []string) []string {
	w := strings.ToLower(want)
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(editDistance(w, strings.ToLower(a)), editDistance(w, strings.ToLower(b))), strings.Compare(a, b))
	})
	if len(names) > maxListed {
		return append(names[:maxListed:maxListed], "…")
	}
	return names
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// emptyNamespace says that a namespace holds nothing at all.
func emptyNamespace(ns string) string {
	if ns == "" {
		return "no namespace given, and Redis has no records and no servers outside a namespace: is --namespace missing?"
	}
	return fmt.Sprintf("namespace %q has no records and no servers: is the namespace right?", ns)
}
