package main

// A --job that names no server is most often a typo ("game-7f9" for
// "game-7f9c2"): like a namespace or driver that holds nothing, locks says
// so, lists the servers that do exist, closest spelling first, and exits
// with status 2 instead of listing no lock.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxHolders bounds the distinct lock holders a scan remembers for
// checkJob's list.
const maxHolders = 1000

// checkJob is asked when locks found no lock of job. A job that holds no
// lock and has no entry in the presence hash (live, or expired and not yet
// cleaned) is unknown here: it returns a usage error (status 2) listing the
// servers that are known, closest to job first: those in the presence hash
// (with what they read) and those holding a lock among the records the scan
// st read (holders). Nil when job has a presence entry.
func (r *reader) checkJob(ctx context.Context, job string, holders map[string]bool, st scanStats) error {
	entries, err := r.pres.List(ctx)
	if err != nil {
		return fmt.Errorf("list the presence hash: %w", err)
	}
	known := map[string]string{} // job → how it reads
	for _, e := range entries {
		if e.JobID == job {
			return nil
		}
		known[e.JobID] = e.Status.String()
	}
	for h := range holders {
		if _, ok := known[h]; !ok {
			known[h] = "holds locks, no presence entry"
		}
	}
	missing := fmt.Sprintf("server %q holds no lock among the records read and has no presence entry in %s: is --job right?", job, r.presKey)
	if len(known) == 0 {
		return usagef("%s; no server does (%s)", missing, scanText(st))
	}
	var list []string
	for _, name := range closest(job, slices.Collect(maps.Keys(known))) {
		if how, ok := known[name]; ok {
			name += " (" + how + ")"
		}
		list = append(list, name)
	}
	return usagef("%s; servers, closest first: %s (%s)", missing, strings.Join(list, ", "), scanText(st))
}
