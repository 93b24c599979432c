package bench

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
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

// Chart shapes.
const (
	chartW, chartH   = 16 * vg.Centimeter, 9 * vg.Centimeter
	handoffHistBins  = 60
	maxCDFPointCount = 2000 // points of a distribution line
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
// (SVG), the result as JSON, and an HTML page that shows them with the
// figures and the machine's facts.
func WriteReport(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	charts := []struct {
		file string
		draw func() (*plot.Plot, error)
	}{
		{ChartThroughput, r.throughputChart},
		{ChartRedisCPU, r.cpuChart},
		{ChartHandoff, r.handoffChart},
		{ChartHandoffCDF, r.handoffCDF},
	}
	for _, c := range charts {
		p, err := c.draw()
		if err != nil {
			return fmt.Errorf("report: %s: %w", c.file, err)
		}
		if err := p.Save(chartW, chartH, filepath.Join(dir, c.file)); err != nil {
			return fmt.Errorf("report: %s: %w", c.file, err)
		}
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
	type row struct {
		Players int
		CycleFigures
	}
	var rows []row
	for _, p := range r.Players() {
		rows = append(rows, row{p, r.Cycle[strconv.Itoa(p)]})
	}
	err = reportTmpl.Execute(f, map[string]any{
		"R": r, "Rows": rows, "Warning": Warning,
		"Embedded": r.Machine.EmbeddedRedis || r.Machine.EmbeddedNATS,
		"Commands": map[string]string{sysOurs: commandLine(r.CycleCommands[sysOurs]),
			sysRaw: commandLine(r.CycleCommands[sysRaw]), sysRedsync: commandLine(r.CycleCommands[sysRedsync])},
		"Systems": systems,
		"Charts":  map[string]string{"Throughput": ChartThroughput, "CPU": ChartRedisCPU, "Handoff": ChartHandoff, "CDF": ChartHandoffCDF},
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// groupedBars draws one group of bars per concurrency, one bar per system.
func (r *Result) groupedBars(title, ylabel string, value func(CycleFigures, string) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
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
		p.Legend.Add(sys, bars)
	}
	p.Y.Max = top * 1.3 // room for the legend above the bars
	p.Legend.Top = true
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	return p, nil
}

// throughputChart: cycles/s per concurrency and system.
func (r *Result) throughputChart() (*plot.Plot, error) {
	return r.groupedBars("Session cycles per second (median of rounds; higher is better)", "cycles/s",
		func(c CycleFigures, sys string) float64 {
			return map[string]float64{sysOurs: c.OursOpsS, sysRaw: c.RawOpsS, sysRedsync: c.RedsyncOpsS}[sys]
		})
}

// cpuChart: Redis CPU per cycle per concurrency and system.
func (r *Result) cpuChart() (*plot.Plot, error) {
	return r.groupedBars("Redis CPU per session cycle (lower is better)", "µs of Redis CPU",
		func(c CycleFigures, sys string) float64 {
			return map[string]float64{sysOurs: c.RedisCPUUS, sysRaw: c.RawRedisCPUUS, sysRedsync: c.RedsyncRedisCPUUS}[sys]
		})
}

// handoffChart: a histogram of the handoff latencies up to their p99, with
// the floors' medians as vertical lines.
func (r *Result) handoffChart() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Stale-connection handoff latency (%d handoffs, up to p99)", r.Handoff.N)
	p.X.Label.Text = "ms from B's Join call to B holding the profile"
	p.Y.Label.Text = "handoffs"
	s := slices.Clone(r.handoffSamples)
	slices.Sort(s)
	if len(s) == 0 {
		s = []float64{0}
	}
	s = s[:max(1, int(math.Ceil(0.99*float64(len(s)))))]
	h, err := plotter.NewHist(plotter.Values(s), handoffHistBins)
	if err != nil {
		return nil, err
	}
	h.FillColor = plotutil.Color(0)
	h.LineStyle.Width = 0
	p.Add(h)
	p.Legend.Add("handoff", h)
	var top float64
	for _, b := range h.Bins {
		top = max(top, b.Weight)
	}
	for i, fl := range []struct {
		name string
		at   float64
	}{{"EVALSHA round trip p50", r.Handoff.FloorEvalSHA.P50MS}, {"NATS request p50", r.Handoff.FloorNATS.P50MS},
		{"composed floor p50", r.Handoff.FloorComposedP50MS}} {
		l, err := plotter.NewLine(plotter.XYs{{X: fl.at, Y: 0}, {X: fl.at, Y: top}})
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i + 1)
		l.Width = vg.Points(2)
		l.Dashes = plotutil.Dashes(i + 1)
		p.Add(l)
		p.Legend.Add(fl.name, l)
	}
	p.X.Min = 0
	p.Y.Max = top * 1.3
	p.Legend.Top = true
	return p, nil
}

// handoffCDF: the distribution of the handoff and of both floors, as the
// share of samples at or below each latency (log scale).
func (r *Result) handoffCDF() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Handoff latency beside its floors (cumulative)"
	p.X.Label.Text = "ms (log scale)"
	p.Y.Label.Text = "share of samples ≤ x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	for i, set := range []struct {
		name string
		s    []float64
	}{{"handoff", r.handoffSamples}, {"EVALSHA round trip", r.evalshaSamples}, {"NATS request/reply", r.natsSamples}} {
		xys := cdf(set.s)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(set.name, l)
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	return p, nil
}

// cdf is the empirical distribution of samples (positive ones: the axis is
// logarithmic), thinned to at most maxCDFPointCount points.
func cdf(samples []float64) plotter.XYs {
	s := slices.DeleteFunc(slices.Clone(samples), func(v float64) bool { return !(v > 0) })
	slices.Sort(s)
	step := max(1, len(s)/maxCDFPointCount)
	var xys plotter.XYs
	for i := 0; i < len(s); i += step {
		xys = append(xys, plotter.XY{X: s[i], Y: float64(i+1) / float64(len(s))})
	}
	if n := len(s); n > 0 && xys[len(xys)-1].X != s[n-1] {
		xys = append(xys, plotter.XY{X: s[n-1], Y: 1})
	}
	return xys
}
