package sampling_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/sampling"
)

// neverBase is a production-like base sampler at its limit: 0 % of new
// traces, children follow their parent.
func neverBase() sdktrace.Sampler { return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)) }

// setup makes a Telemetry whose tracer provider uses sampler, exporting to
// memory.
func setup(t *testing.T, sampler sdktrace.Sampler) (*telemetry.Driver, *telemetry.Telemetry, *tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := telemetry.New(telemetry.Config{TracerProvider: tp, JobID: "server-a",
		MeterProvider: nil /* the global no-op: metrics are not under test */})
	return tel.Driver("PlayerData"), tel, exp, tp
}

// waitedJoin plays a join that finds server-b's lock, waits, reads its
// presence, asks it, decides to take over and takes the lock. Some children
// are started from the join's first context, taken before it waited.
func waitedJoin(ctx context.Context, d *telemetry.Driver, tel *telemetry.Telemetry, outcome telemetry.JoinOutcome) {
	jctx := d.StartJoin(ctx, "user:42")
	_, a := d.StartAcquire(jctx)
	time.Sleep(time.Millisecond)
	a.End(telemetry.AcquireLocked, "server-b", nil)
	wctx := d.StartWait(jctx, telemetry.WaitOtherServer)
	send := tel.StartSend(wctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: "user:42", Peer: "server-b"})
	send.End(nil)
	_, pr := tel.StartPresenceRead(wctx, "server-b")
	pr.End(telemetry.PresenceStopped, 0, nil)
	d.TakeoverDecision(jctx, telemetry.TakeoverStopped, "server-b") // from the first context
	_, a = d.StartAcquire(jctx)                                     // likewise
	a.End(telemetry.AcquireTaken, "", nil)
	d.JoinDone(jctx, 12*time.Second, telemetry.JoinTakeover, outcome, nil)
}

// byName indexes spans by name; each name must appear once.
func byName(t *testing.T, spans tracetest.SpanStubs) map[string][]tracetest.SpanStub {
	t.Helper()
	m := make(map[string][]tracetest.SpanStub)
	for _, s := range spans {
		m[s.Name] = append(m[s.Name], s)
	}
	return m
}

// attr returns the value of key on s.
func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestKeepWaitsKeepsJoinsThatWaited: with a base sampler that keeps no new
// trace, a join that does not wait leaves nothing and a join that waits is
// kept whole: its stand-in root, backdated to the join's start and linked
// to the unsampled join span, the replayed first attempt, and every later
// step as its children.
func TestKeepWaitsKeepsJoinsThatWaited(t *testing.T) {
	d, tel, exp, _ := setup(t, sampling.KeepWaits(neverBase()))
	ctx := context.Background()

	quick := d.StartJoin(ctx, "user:7")
	_, a := d.StartAcquire(quick)
	a.End(telemetry.AcquireTaken, "", nil)
	d.JoinDone(quick, time.Millisecond, telemetry.JoinFree, telemetry.JoinLoaded, nil)
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("a join that did not wait was kept: %d spans", len(spans))
	}

	before := time.Now()
	waitedJoin(ctx, d, tel, telemetry.JoinLoaded)
	spans := exp.GetSpans()
	m := byName(t, spans)
	if len(m["join PlayerData"]) != 1 {
		t.Fatalf("kept spans %v", m)
	}
	root := m["join PlayerData"][0]
	if root.Parent.IsValid() {
		t.Error("the stand-in should be a root")
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.IsSampled() || !root.Links[0].SpanContext.IsValid() {
		t.Errorf("the stand-in should link to the unsampled join span: %v", root.Links)
	}
	if attr(root, telemetry.WaitKey) != "true" || attr(root, telemetry.JoinPathKey) != "takeover" ||
		attr(root, telemetry.JoinOutcomeKey) != "loaded" || attr(root, telemetry.KeyKey) != "user:42" {
		t.Errorf("stand-in attributes %v", root.Attributes)
	}
	if root.StartTime.After(before.Add(time.Millisecond)) || root.EndTime.Before(root.StartTime) {
		t.Errorf("the stand-in should be backdated to the join's start: %v (test began %v)", root.StartTime, before)
	}
	acquires := m["EVALSHA acquire"]
	if len(acquires) != 2 {
		t.Fatalf("%d acquire spans, want the replayed first and the second", len(acquires))
	}
	first := acquires[0]
	if attr(first, telemetry.AcquireOutcomeKey) != "locked" || attr(first, telemetry.HolderKey) != "server-b" {
		t.Errorf("replayed attempt %v", first.Attributes)
	}
	if first.StartTime.Before(root.StartTime) || first.EndTime.Sub(first.StartTime) < time.Millisecond {
		t.Errorf("replayed attempt keeps its own times: %v to %v", first.StartTime, first.EndTime)
	}
	for _, s := range spans {
		if s.Name == root.Name {
			continue
		}
		if s.Parent.SpanID() != root.SpanContext.SpanID() || s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s is not a child of the stand-in", s.Name)
		}
	}
	for _, name := range []string{"publish handoff", "EVALSHA presence.read", "takeover decision"} {
		if len(m[name]) != 1 {
			t.Errorf("%d spans %q, want 1", len(m[name]), name)
		}
	}
}

// TestKeepWaitsUnderUnsampledParent: a join under a game span that was not
// sampled (here a remote parent whose flags say so) is kept once it waits.
func TestKeepWaitsUnderUnsampledParent(t *testing.T) {
	d, tel, exp, _ := setup(t, sampling.KeepWaits(neverBase()))
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	waitedJoin(ctx, d, tel, telemetry.JoinRefused)
	m := byName(t, exp.GetSpans())
	if len(m["join PlayerData"]) != 1 || attr(m["join PlayerData"][0], telemetry.JoinOutcomeKey) != "refused" {
		t.Fatalf("the refused join that waited was not kept: %v", m)
	}
}

// TestWithoutKeepWaits: the base sampler alone drops the stand-in, which is
// why the application installs KeepWaits.
func TestWithoutKeepWaits(t *testing.T) {
	d, tel, exp, _ := setup(t, neverBase())
	waitedJoin(context.Background(), d, tel, telemetry.JoinLoaded)
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("%d spans kept without KeepWaits", len(spans))
	}
}

// TestKeepWaitsDecisions checks the sampler on its own: the marker wins over
// an unsampled parent and keeps the parent's tracestate; anything else is the
// base's decision.
func TestKeepWaitsDecisions(t *testing.T) {
	s := sampling.KeepWaits(neverBase())
	ts, _ := trace.ParseTraceState("k=v")
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceState: ts,
	}))
	p := sdktrace.SamplingParameters{ParentContext: unsampled, TraceID: trace.TraceID{1}, Name: "join PlayerData",
		Attributes: []attribute.KeyValue{telemetry.WaitKey.Bool(true)}}
	r := s.ShouldSample(p)
	if r.Decision != sdktrace.RecordAndSample || r.Tracestate.String() != "k=v" {
		t.Errorf("marked span: %v %q", r.Decision, r.Tracestate.String())
	}
	p.Attributes = []attribute.KeyValue{telemetry.WaitKey.Bool(false)}
	if r := s.ShouldSample(p); r.Decision != sdktrace.Drop {
		t.Errorf("unmarked span under an unsampled parent: %v", r.Decision)
	}
	p.Attributes = nil
	p.ParentContext = context.Background()
	if r := s.ShouldSample(p); r.Decision != sdktrace.Drop {
		t.Errorf("unmarked root at ratio 0: %v", r.Decision)
	}
	if got := s.Description(); got != "KeepWaits{"+neverBase().Description()+"}" {
		t.Errorf("Description %q", got)
	}
	if got := sampling.KeepWaits(nil).Description(); got != "KeepWaits{"+sdktrace.ParentBased(sdktrace.AlwaysSample()).Description()+"}" {
		t.Errorf("nil base: %q", got)
	}
}

// TestNoopTracerMakesNoStandIn: with a no-op tracer StartWait does nothing.
func TestNoopTracerMakesNoStandIn(t *testing.T) {
	tel := telemetry.New(telemetry.Config{TracerProvider: noop.NewTracerProvider()})
	d := tel.Driver("PlayerData")
	ctx := d.StartJoin(context.Background(), "user:1")
	if got := d.StartWait(ctx, telemetry.WaitOtherServer); got != ctx {
		t.Error("StartWait made a context with a no-op tracer")
	}
}
