package telemetry_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard, from this package's folder.
const dashboardPath = "../../dashboards/playerdata.json"

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name, Type string
			Query      any `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// panel is one panel of the dashboard.
type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		Type, UID string
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

var (
	metricRE  = regexp.MustCompile(`\b(playerdata_[a-z_]+)\s*\{`) // a selector
	matcherRE = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"`)
	byRE      = regexp.MustCompile(`\bby \(([^)]*)\)`)
)

// TestDashboard checks the Grafana dashboard: valid JSON of the shape
// Grafana 10 imports, every panel on the Prometheus data source variable,
// laid out without overlaps, and every query naming only metrics and labels
// that the Prometheus exporter emits (promMetrics, checked against a real
// scrape by TestPrometheusNames) or that Prometheus adds (instance).
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a Grafana 10 schema (36+)", d.UID, d.Title, d.SchemaVersion)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "driver", "instance"}) {
		t.Errorf("variables %v", vars)
	}

	ids := make(map[int]bool)
	var cells [][24]bool // occupied grid cells, by row
	var titles []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%q: gridPos %+v", p.Title, g)
		}
		for y := g.Y; y < g.Y+g.H; y++ {
			for len(cells) <= y {
				cells = append(cells, [24]bool{})
			}
			for x := g.X; x < g.X+g.W && x < 24; x++ {
				if cells[y][x] {
					t.Errorf("%q overlaps another panel at %d,%d", p.Title, x, y)
				}
				cells[y][x] = true
			}
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Type != "timeseries" && p.Type != "stat" {
			t.Errorf("%q: panel type %q", p.Title, p.Type)
		}
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%q: data source %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%q: no query", p.Title)
		}
		for _, q := range p.Targets {
			checkQuery(t, p.Title, q.Expr)
		}
	}
	for _, want := range []string{"Join rate by path", "Join latency p50 / p99 by path", "Refused joins (range)",
		"Write latency p50 / p99 by kind", "Write errors by kind and outcome", "Live profiles per server",
		"Retained profiles per server", "Lock losses by reason", "Takeovers", "Fences",
		"Handoff requests and replies", "Profile messages", "Bus messages dropped"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
}

// checkQuery fails unless expr names only known metrics and their labels,
// with balanced brackets.
func checkQuery(t *testing.T, title, expr string) {
	t.Helper()
	for _, pair := range []string{"()", "{}", "[]"} {
		if strings.Count(expr, pair[:1]) != strings.Count(expr, pair[1:]) {
			t.Errorf("%q: unbalanced %s in %s", title, pair, expr)
		}
	}
	allowed := map[string]bool{"instance": true}
	var names []string
	for _, m := range metricRE.FindAllStringSubmatch(expr, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Errorf("%q: no playerdata metric in %s", title, expr)
	}
	for _, name := range names {
		m, ok := promMetrics[name]
		if !ok {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base, cut := strings.CutSuffix(name, suffix); cut {
					if m, ok = promMetrics[base]; ok && m.typ != "histogram" {
						ok = false
					}
					if ok {
						break
					}
				}
			}
		}
		if !ok {
			t.Errorf("%q: unknown metric %s", title, name)
			continue
		}
		for _, l := range m.labels {
			if l != "le" || strings.HasSuffix(name, "_bucket") {
				allowed[l] = true
			}
		}
	}
	for _, mm := range matcherRE.FindAllStringSubmatch(expr, -1) {
		if !allowed[mm[1]] {
			t.Errorf("%q: label %s is not on %v", title, mm[1], names)
		}
	}
	for _, by := range byRE.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(by[1], ",") {
			if l = strings.TrimSpace(l); !allowed[l] {
				t.Errorf("%q: grouping by %s, not a label of %v", title, l, names)
			}
		}
	}
}
