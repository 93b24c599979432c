package bench

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The files WriteReport writes.
const (
	ReportHTML      = "index.html"
	ReportJSON      = "result.json"
	ChartThroughput = "throughput.svg"
	ChartRedisCPU   = "redis_cpu.svg"
	ChartHandoff    = "handoff.svg"
	ChartHandoffCDF = "handoff_cdf.svg"
)

// Chart data.
const (
	handoffHistBins  = 60
	maxCDFPointCount = 250 // points of a distribution line, in the JSON too
)

//go:embed report.html
var reportSrc string

// reportTmpl is the report page.
var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"f0": func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
	"f1": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"f2": func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"f3": func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
}).Parse(reportSrc))

// WriteReport writes the report into dir (created if needed): the charts
// (SVG), the result as JSON (with the data of its distribution charts, so
// that WriteCharts can draw them again from the JSON alone), and an HTML
// page that shows them with the figures and the machine's facts.
func WriteReport(dir string, r *Result) error {
	if r.Charts == nil && len(r.handoffSamples) > 0 {
		r.Charts = r.chartData()
	}
	if _, err := WriteCharts(dir, r); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReportJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, ReportHTML))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	err = writeHTML(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// writeHTML writes the report's HTML page of r to w.
func writeHTML(w io.Writer, r *Result) error {
	type row struct {
		Players int
		CycleFigures
	}
	var rows []row
	for _, p := range r.Players() {
		rows = append(rows, row{p, r.Cycle[strconv.Itoa(p)]})
	}
	commands := map[string]string{}
	for _, sys := range cycleSystems {
		commands[sys] = commandLine(r.CycleCommands[sys], r.stats())
	}
	return reportTmpl.Execute(w, map[string]any{
		"R": r, "Rows": rows, "Warning": Warning,
		"Embedded": r.Machine.EmbeddedRedis || r.Machine.EmbeddedNATS,
		"Commands": commands, "CycleSystems": cycleSystems, "Stats": r.stats(), "Mem": r.memory(),
		"Charts": map[string]string{"Throughput": ChartThroughput, "CPU": ChartRedisCPU, "Handoff": ChartHandoff, "CDF": ChartHandoffCDF},
	})
}

// WriteCharts draws the charts of r into dir (created if needed) as SVG
// files, and returns their names. A chart whose data r lacks (a result
// read from JSON written without Charts) is left out.
func WriteCharts(dir string, r *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var written []string
	for _, c := range r.chartFiles() {
		ch, err := c.draw()
		if err != nil {
			return written, fmt.Errorf("report: %s: %w", c.file, err)
		}
		if ch == nil {
			continue
		}
		if err := ch.writeSVG(filepath.Join(dir, c.file)); err != nil {
			return written, fmt.Errorf("report: %s: %w", c.file, err)
		}
		written = append(written, c.file)
	}
	return written, nil
}

// chartFiles are the report's charts: file name and how each is drawn.
func (r *Result) chartFiles() []struct {
	file string
	draw func() (*chart, error)
} {
	return []struct {
		file string
		draw func() (*chart, error)
	}{
		{ChartThroughput, r.throughputChart},
		{ChartRedisCPU, r.cpuChart},
		{ChartHandoff, r.handoffChart},
		{ChartHandoffCDF, r.handoffCDF},
	}
}

// ChartData is what the report's distribution charts draw, made from the
// run's raw samples (which the JSON does not keep).
type ChartData struct {
	// HandoffHistogram counts the handoff latencies up to their p99.
	HandoffHistogram *Histogram `json:"handoff_histogram,omitempty"`
	// HandoffCDF, EvalSHACDF and NATSCDF are the distributions of the
	// handoff and of its two floors, thinned to at most 250 points each.
	HandoffCDF []CDFPoint `json:"handoff_cdf,omitempty"`
	EvalSHACDF []CDFPoint `json:"evalsha_cdf,omitempty"`
	NATSCDF    []CDFPoint `json:"nats_cdf,omitempty"`
}

// Histogram is a count of samples in equal bins from FromMS to ToMS.
type Histogram struct {
	FromMS float64 `json:"from_ms"`
	ToMS   float64 `json:"to_ms"`
	Counts []int   `json:"counts"`
}

// CDFPoint is one point of a distribution: a latency (ms) and the share of
// samples at or below it.
type CDFPoint [2]float64

// chartData makes the charts' data from the raw samples.
func (r *Result) chartData() *ChartData {
	cd := &ChartData{HandoffCDF: cdf(r.handoffSamples), EvalSHACDF: cdf(r.evalshaSamples), NATSCDF: cdf(r.natsSamples)}
	s := slices.Clone(r.handoffSamples)
	slices.Sort(s)
	s = s[:max(1, int(math.Ceil(0.99*float64(len(s)))))]
	if h, err := plotter.NewHist(plotter.Values(s), handoffHistBins); err == nil {
		hist := &Histogram{FromMS: h.Bins[0].Min, ToMS: h.Bins[len(h.Bins)-1].Max}
		for _, b := range h.Bins {
			hist.Counts = append(hist.Counts, int(math.Round(b.Weight)))
		}
		cd.HandoffHistogram = hist
	}
	return cd
}

// groupedBars draws one group of bars per concurrency, one bar per system.
func (r *Result) groupedBars(title, ylabel string, value func(CycleFigures, string) float64) (*chart, error) {
	c := newChart(title)
	p := c.plot
	p.Y.Label.Text = ylabel
	players := r.Players()
	names := make([]string, len(players))
	for i, n := range players {
		names[i] = strconv.Itoa(n) + " players"
		if n == 1 {
			names[i] = "1 player"
		}
	}
	w := vg.Points(18)
	var top float64
	for i, sys := range systems {
		vs := make(plotter.Values, len(players))
		for j, n := range players {
			vs[j] = value(r.Cycle[strconv.Itoa(n)], sys)
			top = max(top, vs[j])
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(i-1)
		p.Add(bars)
		c.legend.Add(sys, bars)
	}
	newSteppedAxis(&p.Y, top)
	p.X.Min, p.X.Max = -0.6, float64(len(players))-0.4 // room for the outer bars and their labels
	p.NominalX(names...)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // a line through the middle bar of each group says nothing
	p.Add(grid)
	return c, nil
}

// throughputChart: cycles/s per concurrency and system.
func (r *Result) throughputChart() (*chart, error) {
	return r.groupedBars("Session cycles per second (higher is better)", "cycles/s, median of rounds",
		func(c CycleFigures, sys string) float64 {
			return map[string]float64{sysOurs: c.OursOpsS, sysRaw: c.RawOpsS, sysRedsync: c.RedsyncOpsS}[sys]
		})
}

// cpuChart: Redis CPU per cycle per concurrency and system.
func (r *Result) cpuChart() (*chart, error) {
	return r.groupedBars("Redis CPU per session cycle (lower is better)", "µs of Redis CPU per cycle",
		func(c CycleFigures, sys string) float64 {
			return map[string]float64{sysOurs: c.RedisCPUUS, sysRaw: c.RawRedisCPUUS, sysRedsync: c.RedsyncRedisCPUUS}[sys]
		})
}

// handoffChart: a histogram of the handoff latencies up to their p99, with
// the floors' medians as vertical lines; nil without the histogram.
func (r *Result) handoffChart() (*chart, error) {
	if r.Charts == nil || r.Charts.HandoffHistogram == nil || len(r.Charts.HandoffHistogram.Counts) == 0 {
		return nil, nil
	}
	hd := r.Charts.HandoffHistogram
	c := newChart(fmt.Sprintf("Stale-connection handoff latency (%d handoffs, up to p99)", r.Handoff.N))
	p := c.plot
	p.X.Label.Text = "ms from B's Join call to B holding the profile"
	p.Y.Label.Text = "handoffs"
	width := (hd.ToMS - hd.FromMS) / float64(len(hd.Counts))
	h := &plotter.Histogram{Width: width, FillColor: plotutil.Color(0)}
	var top float64
	for i, n := range hd.Counts {
		lo := hd.FromMS + float64(i)*width
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: lo, Max: lo + width, Weight: float64(n)})
		top = max(top, float64(n))
	}
	h.LineStyle.Width = 0
	p.Add(h)
	c.legend.Add("handoff", h)
	for i, fl := range []struct {
		name string
		at   float64
	}{{"EVALSHA p50", r.Handoff.FloorEvalSHA.P50MS}, {"NATS request p50", r.Handoff.FloorNATS.P50MS},
		{"composed floor p50", r.Handoff.FloorComposedP50MS}} {
		l, err := plotter.NewLine(plotter.XYs{{X: fl.at, Y: 0}, {X: fl.at, Y: top}})
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i + 1)
		l.Width = vg.Points(2)
		l.Dashes = plotutil.Dashes(i + 1)
		p.Add(l)
		c.legend.Add(fl.name, l)
	}
	p.X.Min = 0
	newSteppedAxis(&p.Y, top)
	return c, nil
}

// handoffCDF: the distribution of the handoff and of both floors, as the
// share of samples at or below each latency (log scale); nil without them.
func (r *Result) handoffCDF() (*chart, error) {
	if r.Charts == nil || len(r.Charts.HandoffCDF) == 0 {
		return nil, nil
	}
	c := newChart("Handoff latency beside its floors (cumulative)")
	p := c.plot
	p.X.Label.Text = "ms (log scale)"
	p.Y.Label.Text = "share of samples ≤ x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	for i, set := range []struct {
		name string
		pts  []CDFPoint
	}{{"handoff", r.Charts.HandoffCDF}, {"EVALSHA round trip", r.Charts.EvalSHACDF}, {"NATS request/reply", r.Charts.NATSCDF}} {
		if len(set.pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(set.pts))
		for j, pt := range set.pts {
			xys[j] = plotter.XY{X: pt[0], Y: pt[1]}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		c.legend.Add(set.name, l)
	}
	p.Add(plotter.NewGrid())
	return c, nil
}

// cdf is the empirical distribution of samples (positive ones: the axis is
// logarithmic), thinned to at most maxCDFPointCount points (and the last).
func cdf(samples []float64) []CDFPoint {
	s := slices.DeleteFunc(slices.Clone(samples), func(v float64) bool { return !(v > 0) })
	slices.Sort(s)
	step := max(1, len(s)/maxCDFPointCount)
	var pts []CDFPoint
	for i := 0; i < len(s); i += step {
		pts = append(pts, CDFPoint{s[i], float64(i+1) / float64(len(s))})
	}
	if n := len(s); n > 0 && pts[len(pts)-1][0] != s[n-1] {
		pts = append(pts, CDFPoint{s[n-1], 1})
	}
	return pts
}
