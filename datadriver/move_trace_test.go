package datadriver_test

import (
	"testing"

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
