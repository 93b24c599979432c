//go:build linux

package faulttest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestRobustness is the robustness suite: for each fault, three traffic
// servers (three workers each, four keys) Join, Update, Save, Release and
// hold profiles while the fault is injected after a warm-up; every
// operation's call and return is recorded, and porcupine checks that some
// legal order of them, per key, explains what was seen (see regState for
// the model). One short run per fault by default (about 12 s each, four
// at once); PLAYERDATA_ROBUST_LONG=1 runs PLAYERDATA_ROBUST_RUNS runs (10)
// of each fault for about 35 s each, with seeds from
// PLAYERDATA_ROBUST_SEED (1) on. PLAYERDATA_ROBUST_FAULTS (comma-separated)
// narrows the faults.
func TestRobustness(t *testing.T) {
	t.Parallel()
	base := envInt(t, "PLAYERDATA_ROBUST_SEED", 1)
	runs := 1
	p := plan{warmup: 4 * time.Second, hold: 3 * time.Second, recover: 5 * time.Second, limit: 60 * time.Second}
	if os.Getenv("PLAYERDATA_ROBUST_LONG") != "" {
		runs = int(envInt(t, "PLAYERDATA_ROBUST_RUNS", 10))
		p = plan{warmup: 8 * time.Second, hold: 5 * time.Second, recover: 20 * time.Second, limit: 5 * time.Minute}
	}
	for _, f := range selectedFaults(t) {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			for i := range runs {
				q := p
				q.fault, q.seed = f, base+int64(i)
				t.Run(fmt.Sprintf("seed-%d", q.seed), func(t *testing.T) { runRobustness(t, q) })
			}
		})
	}
}

// selectedFaults is PLAYERDATA_ROBUST_FAULTS's faults, or every fault.
func selectedFaults(t *testing.T) []string {
	v := os.Getenv("PLAYERDATA_ROBUST_FAULTS")
	if v == "" {
		return allFaults
	}
	var out []string
	for _, f := range splitComma(v) {
		if _, ok := faultIndex(f); !ok {
			t.Fatalf("PLAYERDATA_ROBUST_FAULTS: unknown fault %q (faults: %v)", f, allFaults)
		}
		out = append(out, f)
	}
	return out
}

func faultIndex(f string) (int, bool) {
	for i, g := range allFaults {
		if g == f {
			return i, true
		}
	}
	return 0, false
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// envInt reads an integer from the environment, def when unset.
func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
