package datadriver_test

import (
	"context"
	"errors"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/sampling"
)

// TestMoveIsTraced: every move has its span, sampled by KeepWaits even
// when the base sampler samples nothing, with its steps as events.
func TestMoveIsTraced(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans),
		sdktrace.WithSampler(sampling.KeepWaits(sdktrace.NeverSample())))
	pr := newPair(t, func(c *datadriver.NodeConfig) { c.TracerProvider = tp })
	da := players(t, pr.a)
	players(t, pr.b) // the target runs the driver
	p := joinWith(t, da, "user:traced", 3)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	var found bool
	for _, s := range spans.GetSpans() {
		if s.Name != "move PlayerData" {
			continue
		}
		found = true
		var steps []string
		for _, e := range s.Events {
			steps = append(steps, e.Name)
		}
		if len(steps) != 3 || steps[0] != "prepare" || steps[1] != "accepted" || steps[2] != "flipped" {
			t.Fatalf("the move's span has events %v, want prepare, accepted, flipped", steps)
		}
		if !hasAttr(s, "playerdata.peer", "server-b") || !hasAttr(s, "playerdata.key", "user:traced") {
			t.Fatalf("the move's span has attributes %v", s.Attributes)
		}
	}
	if !found {
		t.Fatal("no move span recorded under a sampler that samples nothing else")
	}
}

// TestMoveIsMeasured: each move is recorded in playerdata.move.duration by
// how it ended: one that landed, one its target refused (it runs no
// driver of that name).
func TestMoveIsMeasured(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	pr := newPair(t, func(c *datadriver.NodeConfig) { c.MeterProvider = mp })
	da := players(t, pr.a)
	players(t, pr.b) // the target runs PlayerData, not OtherData
	landed := joinWith(t, da, "user:measured", 3)
	if err := landed.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	other, err := datadriver.NewDriver(pr.a.node, datadriver.Config[player]{Name: "OtherData", Autosave: -1})
	if err != nil {
		t.Fatal(err)
	}
	refused, err := other.Join(ctxT(t), "user:refused")
	if err != nil {
		t.Fatal(err)
	}
	if err := refused.MoveTo(ctxT(t), "server-b"); !errors.Is(err, datadriver.ErrMoveRefused) {
		t.Fatalf("a move to a server without the driver = %v, want ErrMoveRefused", err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "playerdata.move.duration" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				o, _ := dp.Attributes.Value("playerdata.move.outcome")
				d, _ := dp.Attributes.Value("playerdata.driver")
				got[d.AsString()+"/"+o.AsString()] += dp.Count
			}
		}
	}
	if got["PlayerData/moved"] != 1 || got["OtherData/refused"] != 1 {
		t.Fatalf("playerdata.move.duration counts %v, want one PlayerData move landed and one OtherData refused", got)
	}
}
