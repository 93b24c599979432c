package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docsPerformance is the page that shows the reference's tables.
const docsPerformance = "../../docs/performance.md"

// docsTables are docs/performance.md's tables drawn from the reference:
// each between "<!-- <name>: drawn from docs/bench/reference.json -->" and
// "<!-- /<name> -->".
var docsTables = map[string]func(*Result) string{"cycle": CycleTable, "ratios": RatioTable}

// TestDocsTables: the session cycle's table and the ratios' table of
// docs/performance.md are what docs/bench/reference.json gives, so the
// page never shows figures of another run than the charts'.
// -update-charts writes them.
func TestDocsTables(t *testing.T) {
	r := docsResult(t)
	page, err := os.ReadFile(docsPerformance)
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range docsTables {
		re := regexp.MustCompile(`(?s)(<!-- ` + name + `: drawn from docs/bench/reference\.json[^>]*-->\n)(.*?)(<!-- /` + name + ` -->)`)
		m := re.FindSubmatchIndex(page)
		if m == nil {
			t.Errorf("docs/performance.md has no %q table between its markers", name)
			continue
		}
		want := table(r)
		if got := string(page[m[4]:m[5]]); got != want {
			if !*updateCharts {
				t.Errorf("docs/performance.md's %s table is not what docs/bench/reference.json gives: run "+
					"go test ./internal/bench -run 'TestDocs' -update-charts\ngot:\n%s\nwant:\n%s", name, got, want)
				continue
			}
			page = append(page[:m[4]:m[4]], append([]byte(want), page[m[5]:]...)...)
		}
	}
	if *updateCharts {
		if err := os.WriteFile(docsPerformance, page, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReferenceIsAFullRun: the reference is a full run on real servers
// whose JSON passes CheckJSON (its ratios are its figures' quotients, with
// the verdicts their targets give).
func TestReferenceIsAFullRun(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(docsBench, docsReference))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckJSON(b); err != nil {
		t.Error(err)
	}
	r := docsResult(t)
	if r.Quick || r.Machine.EmbeddedRedis || r.Machine.EmbeddedNATS {
		t.Errorf("the reference is a quick run (%v) or on embedded servers (%v, %v)", r.Quick,
			r.Machine.EmbeddedRedis, r.Machine.EmbeddedNATS)
	}
}

func TestRatioVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    Target
		of, base  float64
		wantRatio float64
		wantMet   bool
	}{
		{"at least, met", Target{AtLeast: true, Value: 1.25}, 130, 100, 1.3, true},
		{"at least, missed", Target{AtLeast: true, Value: 1.25}, 120, 100, 1.2, false},
		{"at most, met at the bound", Target{Value: 1.3}, 130, 100, 1.3, true},
		{"at most, missed", Target{Value: 1.3}, 131, 100, 1.31, false},
		{"on the figure: 7.9 µs against 8, whatever the floor", Target{Value: 8, OnFigure: true}, 7.9, 7, 1.129, true},
		{"on the figure: 8.1 µs against 8", Target{Value: 8, OnFigure: true}, 8.1, 9, 0.9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Handoff: Handoff{Latency: Latency{P50MS: tc.of}, FloorComposedP50MS: tc.base}}
			var got Ratio
			for _, x := range ComputeRatios(r) {
				if x.Name == "handoff.p50_vs_floor" {
					got = x
				}
			}
			tg := tc.target
			got.Target = &tg
			met := tg.met(got.Ratio, got.Of)
			if got.Ratio != tc.wantRatio || met != tc.wantMet {
				t.Errorf("ratio %v met %v, want %v %v", got.Ratio, met, tc.wantRatio, tc.wantMet)
			}
		})
	}
	t.Run("a figure not measured has no verdict", func(t *testing.T) {
		for _, x := range ComputeRatios(&Result{}) {
			if x.Met != nil {
				t.Errorf("%s: a verdict (%v) on nothing measured", x.Name, *x.Met)
			}
		}
	})
}

// TestWriteComparison: a run slower than the reference at 64 players, with
// a goroutine more per resident profile, is marked worse on the ratios and
// the figure it moved away from their targets, and only there.
func TestWriteComparison(t *testing.T) {
	ref := docsResult(t)
	var now Result
	b, _ := json.Marshal(ref)
	if err := json.Unmarshal(b, &now); err != nil {
		t.Fatal(err)
	}
	c := now.Cycle["64"]
	c.OursOpsS /= 2
	c.GoCPUUS *= 2
	now.Cycle["64"] = c
	now.Memory.GoroutinesPerProfile = ref.Memory.GoroutinesPerProfile + 1 // a figure without a baseline
	var out bytes.Buffer
	if err := WriteComparison(&out, ref, &now); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	for name, worse := range map[string]bool{"cycle.64.vs_raw": true, "cycle.64.vs_redsync": true,
		"cycle.64.go_cpu_vs_raw": true, "profile.goroutines": true, "cycle.8.vs_raw": false, "handoff.p50_vs_floor": false,
		"profile.objects": false} {
		l, ok := lines[name]
		if !ok {
			t.Errorf("no line for %s:\n%s", name, out.String())
			continue
		}
		if strings.Contains(l, "WORSE") != worse {
			t.Errorf("%s: worse %v, want %v: %q", name, !worse, worse, l)
		}
	}
	if !strings.Contains(out.String(), "4 ratios worse") {
		t.Errorf("the summary does not count 4 worse ratios:\n%s", out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("load %s", ref.Machine.LoadBefore)) {
		t.Errorf("the load average of the reference is not shown:\n%s", out.String())
	}
}

// withFloor is the reference with a floor measured at every concurrency
// (floorOf ÷ raw of it), its ratios made again.
func withFloor(t *testing.T, floorOf float64) *Result {
	t.Helper()
	r := docsResult(t)
	for k, c := range r.Cycle {
		c.FloorOpsS = round1(c.RawOpsS * floorOf)
		c.FloorRedisCPUUS, c.FloorGoCPUUS = c.RawRedisCPUUS*1.5, c.RawGoCPUUS*1.1
		c.FloorRounds = []float64{c.FloorOpsS}
		c.FloorRatioRaw = round3(ratio(c.FloorOpsS, c.RawOpsS))
		c.FloorRatioRedsync = round3(ratio(c.FloorOpsS, c.RedsyncOpsS))
		c.RatioFloor = round3(ratio(c.OursOpsS, c.FloorOpsS))
		r.Cycle[k] = c
	}
	r.CycleCommands[sysFloor] = map[string]CommandCost{"evalsha": {CallsPerCycle: 3, USPerCycle: 20}}
	r.Ratios = ComputeRatios(r)
	return r
}

// TestFloorRatios: a run with the cycle's floor has its ratios beside raw
// and redsync and ours beside it, in its JSON (which CheckJSON holds to the
// figures) and the ratio table; a floor ratio that is not its figures'
// quotient, or a floor without its commands, fails CheckJSON.
func TestFloorRatios(t *testing.T) {
	r := withFloor(t, 0.6)
	got := map[string]Ratio{}
	for _, x := range r.Ratios {
		got[x.Name] = x
	}
	for _, p := range r.Players() {
		c, pre := r.Cycle[strconv.Itoa(p)], "cycle."+strconv.Itoa(p)+"."
		for name, want := range map[string][2]float64{"floor_vs_raw": {c.FloorOpsS, c.RawOpsS},
			"floor_vs_redsync": {c.FloorOpsS, c.RedsyncOpsS}, "vs_floor": {c.OursOpsS, c.FloorOpsS}} {
			x, ok := got[pre+name]
			if !ok || x.Of != want[0] || x.Base != want[1] {
				t.Errorf("%s%s: %+v, want %v ÷ %v", pre, name, x, want[0], want[1])
			}
		}
		if x := got[pre+"floor_vs_raw"]; x.Ratio < 0.59 || x.Ratio > 0.61 {
			t.Errorf("%sfloor_vs_raw %v, want 0.6", pre, x.Ratio)
		}
	}
	if table := RatioTable(r); !strings.Contains(table, "`cycle.64.floor_vs_raw` | cycles/s, the floor") {
		t.Errorf("the ratio table has no floor row:\n%s", table)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckJSON(b); err != nil {
		t.Fatalf("a run with its floor: %v", err)
	}

	bad := withFloor(t, 0.6)
	c := bad.Cycle["8"]
	c.FloorRatioRaw *= 2
	bad.Cycle["8"] = c
	delete(bad.CycleCommands, sysFloor)
	b, _ = json.Marshal(bad)
	err = CheckJSON(b)
	for _, want := range []string{"cycle.8.floor_ratio_raw", "cycle_commands.floor: missing"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckJSON of a wrong floor = %v, want %q", err, want)
		}
	}
}

// TestResidentProfileFloor: a run that measured the same value held
// without the library has the resident profile beside it (and the
// library's own part); one that did not has neither ratio, and its table
// and text are the reference's.
func TestResidentProfileFloor(t *testing.T) {
	r := docsResult(t)
	r.Memory.GoHeapPerProfile, r.Memory.BareHeapPerValue = 1688.9, 1128
	got := map[string]Ratio{}
	for _, x := range ComputeRatios(r) {
		got[x.Name] = x
	}
	if x := got["profile.heap_vs_bare"]; x.Of != 1688.9 || x.Base != 1128 || x.Ratio != 1.497 {
		t.Errorf("profile.heap_vs_bare = %+v; want 1688.9 ÷ 1128 = 1.497", x)
	}
	if x := got["profile.library_bytes"]; x.Of != 560.9 { // rounded as the figures are
		t.Errorf("profile.library_bytes = %+v; want 560.9 B", x)
	}
	if x := got["profile.goroutines"]; x.Target == nil {
		t.Errorf("profile.goroutines lost its target: %+v", x)
	}
	r.Ratios = ComputeRatios(r)
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "without the library (the floor): 1128 bytes; the library's own part 561 bytes") {
		t.Errorf("the text does not give the floor of a resident profile:\n%s", text.String())
	}

	old := docsResult(t)
	old.Memory.BareHeapPerValue = 0 // a run from before the bare figure
	for _, x := range ComputeRatios(old) {
		if strings.HasPrefix(x.Name, "profile.heap_vs_bare") || strings.HasPrefix(x.Name, "profile.library") {
			t.Errorf("a run without the bare figure has %s", x.Name)
		}
	}
}
