package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAMissedTargetSaysItsFloor: a target missed by a run that measured its
// floor says the floor beside the verdict, and "out of reach here" when the
// floor misses the target too (issue 35: where a target cannot be met on
// this Redis, show the floor that stops it in the same run); a met target,
// and one whose floor was not measured, say nothing more. CheckJSON holds a
// stored floor verdict to its figures.
func TestAMissedTargetSaysItsFloor(t *testing.T) {
	r := withFloor(t, 0.6) // the cycle's floor at 0.6 × raw: below the ≥ 0.65 × target
	r.Scripts.Floor = 9.2  // the floor script above 8 µs
	r.Scripts.Acquire, r.Scripts.Save, r.Scripts.Release = 20, 7.5, 9.9
	r.Presence.ScriptUSPerBeat, r.Presence.Floor.ScriptUSPerBeat = 27.2, 14.8
	r.Memory.GoHeapPerProfile, r.Memory.BareHeapPerValue = 1688.9, 1128
	// A handoff of 0.564 ms beside a composed floor of 0.337 (3 EVALSHAs of
	// return 1 at 1.364 µs in Redis, and NATS), as the reference of
	// 2026-12-06 measured: whatever the reference holds now.
	r.Handoff.P50MS, r.Handoff.FloorComposedP50MS, r.Handoff.RedisCallsPerHandoff = 0.564, 0.337, 3
	r.Scripts.Trivial = 1.364
	r.Ratios = ComputeRatios(r)
	got := map[string]Ratio{}
	for _, x := range r.Ratios {
		got[x.Name] = x
	}
	for name, want := range map[string]string{
		"cycle.8.vs_raw":           "≥ 0.65×: MISSED (the floor: 0.600×, out of reach here)",
		"scripts.acquire_vs_floor": "≤ 8 µs: MISSED (the floor: 9.2 µs, out of reach here)",
		"scripts.release_vs_floor": "≤ 8 µs: MISSED (the floor: 9.2 µs, out of reach here)",
		"scripts.save_vs_floor":    "≤ 8 µs: met",
		"presence.script_vs_floor": "≤ 20 µs: MISSED (the floor: 14.8 µs)",
		"profile.heap_vs_data":     "≤ 1536 B: MISSED (the floor: 1128 B)",
		// That handoff with each EVALSHA made the 9.2 µs floor script:
		// 0.337 + 3 × 7.836 µs = 0.3605 ms.
		"handoff.p50_vs_floor": "≤ 1.4×: MISSED (the floor: 1.070×)",
	} {
		if v := verdict(got[name]); v != want {
			t.Errorf("%s: %q, want %q", name, v, want)
		}
	}
	if x := got["cycle.8.vs_raw"]; x.FloorMet == nil || *x.FloorMet || x.Floor != 0.6 {
		t.Errorf("cycle.8.vs_raw: floor %v met %v, want 0.6 and missed", x.Floor, x.FloorMet)
	}
	if table := RatioTable(r); !strings.Contains(table, "**≤ 8 µs: MISSED (the floor: 9.2 µs, out of reach here)**") {
		t.Errorf("the ratio table does not say the floor:\n%s", table)
	}

	// A floor that meets the target: the miss is the library's.
	fast := withFloor(t, 0.9)
	for _, x := range fast.Ratios {
		if x.Name == "cycle.8.vs_raw" {
			if v := verdict(x); !strings.HasSuffix(v, "MISSED (the floor: 0.900×)") {
				t.Errorf("cycle.8.vs_raw with the floor at 0.9 × raw: %q", v)
			}
		}
	}

	// A handoff without its scripts measured (--only handoff): no floor.
	alone := &Result{Handoff: r.Handoff}
	for _, x := range ComputeRatios(alone) {
		if x.Name == "handoff.p50_vs_floor" && verdict(x) != "≤ 1.4×: MISSED" {
			t.Errorf("handoff.p50_vs_floor without the scripts measured: %q", verdict(x))
		}
	}

	// Nothing measured, nothing said.
	for _, x := range ComputeRatios(&Result{}) {
		if x.FloorMet != nil || x.Floor != 0 {
			t.Errorf("%s: a floor verdict (%v) on nothing measured", x.Name, x.Floor)
		}
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckJSON(b); err != nil {
		t.Fatalf("a run with its floors' verdicts: %v", err)
	}
	for i := range r.Ratios {
		if r.Ratios[i].Name == "scripts.acquire_vs_floor" {
			met := true
			r.Ratios[i].FloorMet = &met
		}
	}
	b, _ = json.Marshal(r)
	if err := CheckJSON(b); err == nil || !strings.Contains(err.Error(), "scripts.acquire_vs_floor: the floor's verdict") {
		t.Errorf("CheckJSON of a forged floor verdict = %v", err)
	}
}
