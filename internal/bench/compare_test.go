package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
