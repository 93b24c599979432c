package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ReadResult reads a Result from a file the command's --json (or
// --report's result.json) wrote.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a bench result: %w", path, err)
	}
	if len(r.Cycle) == 0 {
		return nil, fmt.Errorf("%s: not a bench result: no session cycle", path)
	}
	return &r, nil
}

// regression is how far a ratio may move away from its target's side,
// relative to the reference, before the comparison calls it worse: runs
// on two cores under other jobs move by about this much.
const regression = 0.10

// writeRatios writes r's ratios for people: each comparison, its ratio,
// the two figures, the target and whether it is met.
func (r *Result) writeRatios(ew *errWriter) {
	if len(r.Ratios) == 0 {
		return
	}
	ew.printf("\nRatios (each figure ÷ its baseline or floor in this run; issue 35's targets):\n")
	tw := tabwriter.NewWriter(ew, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ratio\tvalue\tours\tbaseline\ttarget\t")
	for _, x := range r.Ratios {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", x.Name, fmtRatio(x.Ratio), fmtFigure(x.Of, x.Unit),
			fmtBase(x.Base, x.Unit), verdict(x))
	}
	_ = tw.Flush()
}

// WriteComparison writes, for each ratio of now, the reference's beside
// it (a figure without a baseline, such as a resident profile's
// goroutines, beside the reference's figure): both, the change, the target
// and now's verdict, and "WORSE" where it moved away from its target's side
// by more than 10 % of the reference's. Its header gives the load average
// of both runs (the machine's noise). The reference's ratios are computed
// from its figures, so a result written before ratios existed compares
// too.
func WriteComparison(w io.Writer, ref, now *Result) error {
	ew := &errWriter{w: w}
	refs := map[string]Ratio{}
	for _, x := range ComputeRatios(ref) {
		refs[x.Name] = x
	}
	ew.printf("Ratios, reference (%s, load %s) → now (%s, load %s):\n", ref.Machine.StartedAt.Format("2006-01-02 15:04"),
		orUnknown(ref.Machine.LoadBefore), now.Machine.StartedAt.Format("2006-01-02 15:04"), orUnknown(now.Machine.LoadBefore))
	tw := tabwriter.NewWriter(ew, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ratio\treference\tnow\tchange\ttarget\t\t")
	n := 0 // worse
	for _, x := range ComputeRatios(now) {
		rx, ok := refs[x.Name]
		change, mark := "", ""
		was, is := compared(rx), compared(x)
		if ok && was > 0 && is > 0 {
			change = fmt.Sprintf("%+.0f %%", 100*(is/was-1))
		}
		// A ratio of ours to a floor that bounds the figure itself (8 µs per
		// script) moves with the floor too: only its verdict says.
		if t := x.Target; ok && t != nil && (!t.OnFigure || x.Base == 0) && (was > 0 || x.Base == 0) && worse(t, was, is) {
			mark = "WORSE"
			n++
		}
		refRatio := "—"
		if ok {
			refRatio = fmtCompared(rx)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t\n", x.Name, refRatio, fmtCompared(x), change, verdict(x), mark)
	}
	_ = tw.Flush()
	ew.printf("%d ratios worse than the reference by more than %.0f %% (of those with a target).\n", n, 100*regression)
	return ew.err
}

// worse reports whether now moved away from t's side of was by more than
// regression (of was: a figure that was 0 is worse at any rise).
func worse(t *Target, was, now float64) bool {
	if t.AtLeast {
		return now < was*(1-regression)
	}
	return now > was*(1+regression)
}

// compared is what a comparison compares of x: its ratio, or its figure
// when it has no baseline (a resident profile's objects and goroutines).
func compared(x Ratio) float64 {
	if x.Base == 0 {
		return x.Of
	}
	return x.Ratio
}

// fmtCompared formats compared(x): a ratio, or a figure with its unit.
func fmtCompared(x Ratio) string {
	if x.Base == 0 {
		return fmtFigure(x.Of, x.Unit)
	}
	return fmtRatio(x.Ratio)
}

// fmtRatio formats a ratio, or a dash for one not measured.
func fmtRatio(v float64) string {
	if v == 0 {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', 3, 64) + "×"
}

// fmtFigure formats a figure with its unit, or a dash for one not
// measured.
func fmtFigure(v float64, unit string) string {
	if v == 0 && unit != "goroutines" {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + unit
}

// fmtBase formats a baseline: a dash when there is none.
func fmtBase(v float64, unit string) string {
	if v == 0 {
		return "—"
	}
	return fmtFigure(v, unit)
}

// verdict is a ratio's target and whether it is met ("≥ 1.25×: met"); a
// missed one says its floor in the same run, when it has one, and whether
// the floor misses it too ("≤ 8 µs: MISSED (the floor: 9.2 µs, out of
// reach here)").
func verdict(x Ratio) string {
	if x.Target == nil {
		return "—"
	}
	s := x.Target.describe(x.Unit)
	switch {
	case x.Met == nil:
		return s + ": not measured"
	case *x.Met:
		return s + ": met"
	}
	s += ": MISSED"
	if x.FloorMet != nil {
		floor := fmtRatio(x.Floor)
		if x.Target.OnFigure {
			floor = fmtFigure(x.Floor, x.Unit)
		}
		if *x.FloorMet {
			return s + " (the floor: " + floor + ")"
		}
		return s + " (the floor: " + floor + ", out of reach here)"
	}
	return s
}

// RatioTable is r's ratios as a Markdown table (docs/performance.md shows
// the reference's, and a test holds it to docs/bench/reference.json).
func RatioTable(r *Result) string {
	var b strings.Builder
	b.WriteString("| ratio | what | value | ours | baseline | issue 35's target |\n|---|---|---|---|---|---|\n")
	for _, x := range ComputeRatios(r) {
		v := verdict(x)
		if x.Met != nil && !*x.Met {
			v = "**" + v + "**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", x.Name, x.What, fmtRatio(x.Ratio),
			fmtFigure(x.Of, x.Unit), fmtBase(x.Base, x.Unit), v)
	}
	return b.String()
}

// CycleTable is r's session cycle as a Markdown table (docs/performance.md
// shows the reference's): throughputs, ratios, Redis and Go CPU per cycle.
func CycleTable(r *Result) string {
	var b strings.Builder
	b.WriteString("| players | ours cycles/s | raw | redsync | ours/raw | ours/redsync | " +
		"Redis CPU µs per cycle: ours / raw / redsync | Go CPU µs per cycle: ours / raw / redsync |\n" +
		"|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Players() {
		c := r.Cycle[strconv.Itoa(p)]
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.2f | **%.2f** | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f |\n", p,
			thousands(c.OursOpsS), thousands(c.RawOpsS), thousands(c.RedsyncOpsS), c.RatioRaw, c.RatioRedsync,
			c.RedisCPUUS, c.RawRedisCPUUS, c.RedsyncRedisCPUUS, c.GoCPUUS, c.RawGoCPUUS, c.RedsyncGoCPUUS)
	}
	return b.String()
}

// thousands formats v rounded to an integer with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
