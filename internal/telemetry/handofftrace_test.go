package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/presence"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestHandoffTraceRecordsEachMessage is TestHandoffTraceAcrossServers through the lockhandoff.Trace a Node hands
// its Handoff: a request A publishes is processed on B under A's span, B's
// reply under B's processing, A's proving read under the join; each message
// is counted once on each side, and a publish that fails is counted failed.
func TestHandoffTraceRecordsEachMessage(t *testing.T) {
	a := newSDK(t, "server-a", "game.CKHandoff", nil)
	b := newSDK(t, "server-b", "game.CKHandoff", sdktrace.ParentBased(sdktrace.NeverSample()))
	ta, tb := a.tel.HandoffTrace(), b.tel.HandoffTrace()
	da := a.tel.Driver("PlayerData")

	jctx := da.StartJoin(context.Background(), secretKey)
	wctx := da.StartWait(jctx, telemetry.WaitOtherServer)
	req := messaging.Message{Type: messaging.TypeRequest, Driver: "PlayerData", Key: secretKey, Requester: "server-a", Sender: "server-a"}
	sctx := ta.PublishStart(wctx, "server-b", &req)
	if req.TraceParent == "" {
		t.Fatal("a sampled publish set no traceparent on the message")
	}
	ta.PublishDone(sctx, "server-b", req, nil)

	pctx := tb.ProcessStart(context.Background(), req)
	reply := messaging.Message{Type: messaging.TypeReply, Driver: "PlayerData", Key: secretKey, Sender: "server-b"}
	rctx := tb.PublishStart(pctx, "server-a", &reply)
	tb.PublishDone(rctx, "server-a", reply, errors.New("bus down"))
	tb.ProcessDone(pctx)

	actx := ta.ProcessStart(wctx, reply)
	ta.ProcessDone(actx)
	readCtx := ta.ReadStart(wctx, "server-b")
	ta.ReadDone(readCtx, presence.Reading{Status: presence.Alive, ExpiresIn: time.Second})
	da.JoinDone(jctx, time.Millisecond, telemetry.JoinHandoff, telemetry.JoinLoaded, nil)

	as, bs := a.spans.GetSpans(), b.spans.GetSpans()
	join := spanNamed(t, as, "join PlayerData")
	pub := spanNamed(t, as, "publish game.CKHandoff.{job}")
	bproc := spanNamed(t, bs, "process game.CKHandoff.{job}")
	bpub := spanNamed(t, bs, "publish game.CKHandoff.{job}")
	aproc := spanNamed(t, as, "process game.CKHandoff.{job}")
	read := spanNamed(t, as, "EVALSHA presence.read")
	childOf(t, pub, join)
	childOf(t, bproc, pub)
	childOf(t, bpub, bproc)
	childOf(t, aproc, bpub)
	childOf(t, read, join)
	if got := attr(read, telemetry.PresenceStatusKey); got != "alive" {
		t.Errorf("presence read span status %q, want alive", got)
	}
	if attr(bproc, telemetry.PeerKey) != "server-a" || attr(aproc, telemetry.PeerKey) != "server-b" {
		t.Errorf("peers: B processed from %q, A from %q", attr(bproc, telemetry.PeerKey), attr(aproc, telemetry.PeerKey))
	}

	count := func(s *sdk, name, msg, errType string) int64 {
		var n int64
		for _, p := range s.collect(t)[name].Data.(metricdataSum).DataPoints {
			v, _ := p.Attributes.Value(telemetry.HandoffMessageKey)
			e, _ := p.Attributes.Value("error.type")
			if v.AsString() == msg && e.AsString() == errType {
				n += p.Value
			}
		}
		return n
	}
	if count(a, "playerdata.handoff.sent", "request", "") != 1 || count(b, "playerdata.handoff.received", "request", "") != 1 ||
		count(b, "playerdata.handoff.sent", "reply", "publish_failed") != 1 || count(a, "playerdata.handoff.received", "reply", "") != 1 {
		t.Error("handoff counts: want A's request sent and received once, B's reply failed once and received once")
	}
}

// TestHandoffTraceWithoutTracing: with tracing off the Start funcs hand
// back the context they got (no span to carry) and the Done funcs still
// count.
func TestHandoffTraceWithoutTracing(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := &sdk{reader: reader, tel: telemetry.New(telemetry.Config{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(),
		JobID: "server-a", NATSPrefix: "game.CKHandoff"})}
	tr := s.tel.HandoffTrace()
	ctx := context.Background()
	m := messaging.Message{Type: messaging.TypeNotify, Driver: "PlayerData", Key: secretKey, Sender: "server-a"}
	if got := tr.PublishStart(ctx, "server-b", &m); got != ctx || m.TraceParent != "" {
		t.Fatalf("PublishStart without tracing: a new context, or traceparent %q", m.TraceParent)
	}
	tr.PublishDone(ctx, "server-b", m, nil)
	if got := tr.ProcessStart(ctx, m); got != ctx {
		t.Fatal("ProcessStart without tracing: a new context")
	}
	tr.ProcessDone(ctx)
	sent, received := s.collect(t)["playerdata.handoff.sent"], s.collect(t)["playerdata.handoff.received"]
	total := func(d any) (n int64) {
		for _, p := range d.(metricdataSum).DataPoints {
			n += p.Value
		}
		return n
	}
	if total(sent.Data) != 1 || total(received.Data) != 1 {
		t.Errorf("sent %d, received %d; want 1 each", total(sent.Data), total(received.Data))
	}
	var nilTel *telemetry.Telemetry
	if nilTel.HandoffTrace() != nil {
		t.Error("a nil Telemetry's HandoffTrace is not nil")
	}
}

// telemetry.PresenceStatus is presence.Status, value for value (the
// HandoffTrace converts one into the other).
func TestPresenceStatusMatchesTelemetry(t *testing.T) {
	for _, s := range []presence.Status{presence.Unknown, presence.Alive, presence.Stopped} {
		if got := telemetry.PresenceStatus(s).String(); got != s.String() {
			t.Errorf("presence %s is telemetry %s", s, got)
		}
	}
}
