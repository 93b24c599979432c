package datadriver

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"
	"time"
)

// TestFirstAutosavePhaseIsStable: a profile's first autosave falls where
// the FNV-1a hash of its key, server and epoch puts it (as builds before
// the in-place hash did), so a replayed run saves at the same moments, and
// profiles loaded together spread over the period.
func TestFirstAutosavePhaseIsStable(t *testing.T) {
	d := &Driver[struct{}]{node: &Node{jobID: "server-a"}}
	const period = 30 * time.Second
	seen := map[time.Duration]bool{}
	for i, key := range []string{"user:1", "user:2", "user:3", "ü:λ", ""} {
		p := &Profile[struct{}]{d: d, key: key}
		p.initLife("", int64(i*7919))
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%s\x00%d", key, "server-a", i*7919)
		if got, want := p.phase0(period), time.Duration(h.Sum64()%uint64(period)); got != want {
			t.Errorf("phase of %q at epoch %d = %v, want %v", key, i*7919, got, want)
		}
		seen[p.phase0(period)] = true
	}
	if len(seen) < 4 {
		t.Errorf("five profiles got %d distinct phases; want them spread", len(seen))
	}
}

// TestALeaseGenerationPast32BitsFences: a profile holds a presence lease
// generation in 32 bits; one past them is held as the largest, which the
// lease (its generations only grow) never has again, so the session
// fences itself rather than skip its lease check (0 would skip it).
func TestALeaseGenerationPast32BitsFences(t *testing.T) {
	for _, tc := range []struct {
		gen  uint64
		want uint32
	}{{0, 0}, {1, 1}, {math.MaxUint32, math.MaxUint32}, {math.MaxUint32 + 1, math.MaxUint32}, {1 << 40, math.MaxUint32}} {
		if got := leaseGenOf(tc.gen); got != tc.want {
			t.Errorf("leaseGenOf(%d) = %d, want %d", tc.gen, got, tc.want)
		}
	}
}
