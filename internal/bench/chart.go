package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A chart is drawn so that nothing is cut or covered in any SVG renderer:
// the title across the top, the plot below it, and the legend in a column
// of its own at the right, never over the data. Text is Liberation Sans
// (the font gonum measures with), named in the SVG with its metric twins
// Arial and Helvetica before the generic sans-serif; every width the
// layout reserves for text is fallbackWidth wider than measured, for a
// renderer that has none of them (DejaVu Sans is about 10 % wider).

// Chart shapes.
const (
	chartW, chartH = 16 * vg.Centimeter, 9 * vg.Centimeter
	// chartMargin is kept clear at every edge of the canvas.
	chartMargin = vg.Length(6)
	// legendGap separates the plot from the legend column, and the title
	// from the plot.
	legendGap = vg.Length(10)
	// fallbackWidth is how much wider than measured the layout lets text
	// be drawn.
	fallbackWidth = 1.15
	// textGap separates lines of text (legend entries, an axis label from
	// its tick labels) beyond their fonts' line height.
	textGap = vg.Length(4)
)

// chartFamily is the SVG font-family the charts name: the measured font,
// then fonts with the same metrics, then the generic family.
const chartFamily = "Liberation Sans,Arial,Helvetica,sans-serif"

// chartFont is the charts' font at size.
func chartFont(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// chart is one figure: its title, its plot (axes and data) and its legend.
type chart struct {
	title  string
	plot   *plot.Plot
	legend plot.Legend
}

// newChart returns an empty chart with the charts' fonts.
func newChart(title string) *chart {
	p := plot.New()
	p.X.Label.TextStyle.Font = chartFont(11)
	p.Y.Label.TextStyle.Font = chartFont(11)
	p.X.Tick.Label.Font = chartFont(10)
	p.Y.Tick.Label.Font = chartFont(10)
	p.X.Label.Padding, p.Y.Label.Padding = textGap, textGap
	l := plot.NewLegend()
	l.TextStyle.Font = chartFont(10)
	l.Top, l.Left = true, true
	l.Padding = textGap
	return &chart{title: title, plot: p, legend: l}
}

// titleStyle is how a chart's title is drawn.
func titleStyle() text.Style {
	return text.Style{Font: chartFont(12), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
}

// draw lays the chart out on dc and draws it; it returns the rectangle of
// the data (inside the axes), which no text may cover.
func (c *chart) draw(dc draw.Canvas) vg.Rectangle {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	area := draw.Crop(dc, chartMargin, -chartMargin, chartMargin, -chartMargin)
	ts := titleStyle()
	if c.title != "" {
		area.FillText(ts, vg.Point{X: (area.Min.X + area.Max.X) / 2, Y: area.Max.Y}, c.title)
		area = draw.Crop(area, 0, 0, 0, -(ts.Height(c.title) + legendGap))
	}
	if lw := c.legendWidth(area); lw > 0 {
		legend := draw.Crop(area, area.Size().X-lw, 0, 0, 0)
		c.legend.Draw(legend)
		area = draw.Crop(area, 0, -(lw + legendGap), 0, 0)
	}
	c.plot.Draw(area)
	return c.plot.DataCanvas(area).Rectangle
}

// legendWidth is the width of the legend column, text widened by
// fallbackWidth; 0 without a legend.
func (c *chart) legendWidth(area draw.Canvas) vg.Length {
	r := c.legend.Rectangle(area)
	if r.Size().Y == 0 {
		return 0
	}
	w := r.Size().X - c.legend.ThumbnailWidth
	return c.legend.ThumbnailWidth + vg.Length(fallbackWidth)*w
}

// fits reports an error when a text of the chart cannot fit its canvas even
// at fallbackWidth: the title, or the legend beside a plot at least a third
// of the canvas wide.
func (c *chart) fits() error {
	inner := chartW - 2*chartMargin
	if w := vg.Length(fallbackWidth) * titleStyle().Width(c.title); w > inner {
		return fmt.Errorf("chart %q: the title is %.0f pt wide, more than the %.0f pt the canvas holds", c.title, w, inner)
	}
	area := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: inner, Y: chartH}}}
	if lw := c.legendWidth(area); lw > 2*inner/3 {
		return fmt.Errorf("chart %q: the legend is %.0f pt wide, more than two thirds of the canvas", c.title, lw)
	}
	return nil
}

// writeSVG draws the chart into an SVG file at path.
func (c *chart) writeSVG(path string) error {
	if err := c.fits(); err != nil {
		return err
	}
	canvas := vgsvg.New(chartW, chartH)
	c.draw(draw.New(canvas))
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return err
	}
	svg := bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"), []byte("font-family:"+chartFamily+";"))
	return os.WriteFile(path, svg, 0o644)
}

// steppedTicks labels a linear axis from 0 at a round step (1, 2 or 5
// times a power of ten) that gives about five labels.
type steppedTicks struct{ step float64 }

// newSteppedAxis sets ax to run from 0 to the first step at or above top,
// labelled every step.
func newSteppedAxis(ax *plot.Axis, top float64) {
	step := roundStep(top / 5)
	ax.Min, ax.Max = 0, math.Ceil(top*1.02/step)*step
	ax.Tick.Marker = steppedTicks{step: step}
}

// roundStep is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least v.
func roundStep(v float64) float64 {
	if !(v > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// Ticks implements plot.Ticker: a labelled tick every step, a minor one
// halfway.
func (t steppedTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for i := math.Ceil(lo / t.step * 2); i*t.step/2 <= hi*(1+1e-9); i++ {
		v := i * t.step / 2
		label := ""
		if int(i)%2 == 0 {
			label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}
