package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// docsBench holds the README's charts and the run they were drawn from,
// the reference (docsReference) a run compares itself with (--compare).
const (
	docsBench     = "../../docs/bench"
	docsReference = "reference.json"
)

var updateCharts = flag.Bool("update-charts", false,
	"redraw docs/bench/*.svg and docs/performance.md's ratio table from docs/bench/reference.json")

// docsResult is the committed full run.
func docsResult(t *testing.T) *Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(docsBench, docsReference))
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestDocsCharts: the committed charts are what the committed result
// draws, so they can be made again without a run and never drift from the
// code that draws them. -update-charts redraws them.
func TestDocsCharts(t *testing.T) {
	r := docsResult(t)
	dir := t.TempDir()
	if *updateCharts {
		dir = docsBench
	}
	written, err := WriteCharts(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join(docsBench, "*.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range committed {
		committed[i] = filepath.Base(committed[i])
	}
	if !slices.Equal(slices.Sorted(slices.Values(written)), committed) {
		t.Errorf("the result draws %v, docs/bench holds %v", written, committed)
	}
	for _, f := range written {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(docsBench, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/bench/%s is not what docs/bench/reference.json draws: run go test ./internal/bench -run TestDocsCharts -update-charts", f)
		}
	}
}

// TestChartsShowEverything: in every chart, of the committed run and of a
// run with every kind of data, every text lies inside the canvas even
// drawn fallbackWidth wider than measured (a renderer without the font),
// no text covers the data, and no two texts overlap.
func TestChartsShowEverything(t *testing.T) {
	for name, r := range map[string]*Result{"docs": docsResult(t), "synthetic": syntheticResult()} {
		for _, c := range r.chartFiles() {
			t.Run(name+"/"+c.file, func(t *testing.T) {
				ch, err := c.draw()
				if err != nil {
					t.Fatal(err)
				}
				if ch == nil {
					if name == "synthetic" {
						t.Fatal("no chart drawn from a result with every kind of data")
					}
					t.Skip("the committed result has no data for this chart")
				}
				checkLayout(t, ch)
			})
		}
	}
}

// checkLayout draws ch on a recorder and checks where its texts fall.
func checkLayout(t *testing.T, ch *chart) {
	t.Helper()
	rec := &recorder.Canvas{}
	canvas := vg.Rectangle{Max: vg.Point{X: chartW, Y: chartH}}
	data := ch.draw(draw.Canvas{Canvas: rec, Rectangle: canvas})
	texts := textBoxes(t, rec.Actions)
	if len(texts) < 5 {
		t.Fatalf("only %d texts drawn", len(texts))
	}
	for i, tx := range texts {
		wide := tx.box
		grow := vg.Length(fallbackWidth-1) * tx.width
		wide.Min.X -= grow
		wide.Max.X += grow
		if rotated(tx) {
			wide = tx.box
			wide.Min.Y -= grow
			wide.Max.Y += grow
		}
		if !inside(wide, canvas) {
			t.Errorf("%q at %v, %v drawn %.0f%% wider: not inside the %v canvas", tx.s, tx.box.Min, tx.box.Max, (fallbackWidth-1)*100, canvas.Max)
		}
		if overlaps(tx.box, data) {
			t.Errorf("%q at %v, %v covers the data (%v, %v)", tx.s, tx.box.Min, tx.box.Max, data.Min, data.Max)
		}
		for _, other := range texts[i+1:] {
			if overlaps(tx.box, other.box) {
				t.Errorf("%q and %q overlap", tx.s, other.s)
			}
		}
	}
}

// drawnText is one string drawn, with its box on the canvas.
type drawnText struct {
	s     string
	width vg.Length // measured, along the text
	box   vg.Rectangle
	angle float64
}

func rotated(tx drawnText) bool { return math.Abs(math.Sin(tx.angle)) > 0.5 }

// textBoxes replays the recorded actions, tracking the transforms, and
// returns each string's box from the font's own metrics.
func textBoxes(t *testing.T, actions []recorder.Action) []drawnText {
	t.Helper()
	cache := font.DefaultCache
	m, angle := identity(), 0.0
	type state struct {
		m     affine
		angle float64
	}
	var stack []state
	var out []drawnText
	for _, a := range actions {
		switch a := a.(type) {
		case *recorder.Push:
			stack = append(stack, state{m, angle})
		case *recorder.Pop:
			m, angle = stack[len(stack)-1].m, stack[len(stack)-1].angle
			stack = stack[:len(stack)-1]
		case *recorder.Translate:
			m = m.mul(affine{1, 0, 0, 1, float64(a.Point.X), float64(a.Point.Y)})
		case *recorder.Rotate:
			s, c := math.Sincos(a.Angle)
			m, angle = m.mul(affine{c, s, -s, c, 0, 0}), angle+a.Angle
		case *recorder.Scale:
			m = m.mul(affine{a.X, 0, 0, a.Y, 0, 0})
		case *recorder.FillString:
			if !cache.Has(a.Font) {
				t.Fatalf("font %v not in gonum's cache", a.Font)
			}
			face := cache.Lookup(a.Font, a.Size)
			w, ext := face.Width(a.String), face.Extents()
			local := vg.Rectangle{Min: vg.Point{X: a.Point.X, Y: a.Point.Y - ext.Descent},
				Max: vg.Point{X: a.Point.X + w, Y: a.Point.Y + ext.Ascent}}
			out = append(out, drawnText{s: a.String, width: w, box: m.box(local), angle: angle})
		}
	}
	return out
}

// affine is the matrix [a c e; b d f; 0 0 1].
type affine struct{ a, b, c, d, e, f float64 }

func identity() affine { return affine{1, 0, 0, 1, 0, 0} }

func (m affine) mul(n affine) affine {
	return affine{
		m.a*n.a + m.c*n.b, m.b*n.a + m.d*n.b,
		m.a*n.c + m.c*n.d, m.b*n.c + m.d*n.d,
		m.a*n.e + m.c*n.f + m.e, m.b*n.e + m.d*n.f + m.f,
	}
}

// box is the bounding box of r transformed by m.
func (m affine) box(r vg.Rectangle) vg.Rectangle {
	out := vg.Rectangle{Min: vg.Point{X: math.MaxFloat64, Y: math.MaxFloat64}, Max: vg.Point{X: -math.MaxFloat64, Y: -math.MaxFloat64}}
	for _, p := range []vg.Point{r.Min, r.Max, {X: r.Min.X, Y: r.Max.Y}, {X: r.Max.X, Y: r.Min.Y}} {
		x := vg.Length(m.a*float64(p.X) + m.c*float64(p.Y) + m.e)
		y := vg.Length(m.b*float64(p.X) + m.d*float64(p.Y) + m.f)
		out.Min.X, out.Min.Y = min(out.Min.X, x), min(out.Min.Y, y)
		out.Max.X, out.Max.Y = max(out.Max.X, x), max(out.Max.Y, y)
	}
	return out
}

func inside(r, outer vg.Rectangle) bool {
	return r.Min.X >= outer.Min.X && r.Min.Y >= outer.Min.Y && r.Max.X <= outer.Max.X && r.Max.Y <= outer.Max.Y
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// syntheticResult is a result with every chart's data, its figures of the
// size a full run gives.
func syntheticResult() *Result {
	rng := rand.New(rand.NewPCG(1, 2))
	lognormal := func(n int, median, spread float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = median * math.Exp(spread*rng.NormFloat64())
		}
		return s
	}
	r := &Result{Cycle: map[string]CycleFigures{}}
	for i, n := range []int{1, 8, 64} {
		f := float64(i + 1)
		r.Cycle[fmt.Sprint(n)] = CycleFigures{Players: n, OursOpsS: 9000 * f, RawOpsS: 12000 * f, RedsyncOpsS: 7000 * f,
			RedisCPUUS: 120 / f, RawRedisCPUUS: 70 / f, RedsyncRedisCPUUS: 110 / f}
	}
	r.handoffSamples = lognormal(5000, 0.62, 0.25)
	r.evalshaSamples = lognormal(2000, 0.06, 0.3)
	r.natsSamples = lognormal(2000, 0.2, 0.3)
	r.Handoff.N = len(r.handoffSamples)
	r.Handoff.FloorEvalSHA.P50MS, r.Handoff.FloorNATS.P50MS, r.Handoff.FloorComposedP50MS = 0.06, 0.2, 0.38
	r.Charts = r.chartData()
	return r
}
