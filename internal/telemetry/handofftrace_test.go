package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestHandoffTraceRecordsEachMessage is TestHandoffTraceAcrossServers through the handoff hooks a Node's
// lockhandoff.Trace calls: a request A publishes is processed on B under A's span, B's
// reply under B's processing, A's proving read under the join; each message
// is counted once on each side, and a publish that fails is counted failed.
func TestHandoffTraceRecordsEachMessage(t *testing.T) {
	a := newSDK(t, "server-a", "game.CKHandoff", nil)
	b := newSDK(t, "server-b", "game.CKHandoff", sdktrace.ParentBased(sdktrace.NeverSample()))
	da := a.tel.Driver("PlayerData")

	jctx := da.StartJoin(context.Background(), secretKey)
	wctx := da.StartWait(jctx, telemetry.WaitOtherServer)
	req := telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey}
	sctx, parent, state := a.tel.HandoffPublishStart(wctx, "server-b", req)
	if parent == "" {
		t.Fatal("a sampled publish gave no traceparent for the message")
	}
	a.tel.HandoffPublishDone(sctx, req.Kind, nil)

	req.Peer, req.TraceParent, req.TraceState = "server-a", parent, state
	pctx := b.tel.HandoffProcessStart(context.Background(), req)
	reply := telemetry.Message{Kind: telemetry.MsgReply, Driver: "PlayerData", Key: secretKey}
	rctx, rparent, rstate := b.tel.HandoffPublishStart(pctx, "server-a", reply)
	b.tel.HandoffPublishDone(rctx, reply.Kind, errors.New("bus down"))
	telemetry.HandoffProcessDone(pctx)

	reply.Peer, reply.TraceParent, reply.TraceState = "server-b", rparent, rstate
	actx := a.tel.HandoffProcessStart(wctx, reply)
	telemetry.HandoffProcessDone(actx)
	readCtx := a.tel.HandoffReadStart(wctx, "server-b")
	telemetry.HandoffReadDone(readCtx, telemetry.PresenceAlive, time.Second, nil)
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
	ctx := context.Background()
	m := telemetry.Message{Kind: telemetry.MsgNotify, Driver: "PlayerData", Key: secretKey}
	got, parent, _ := s.tel.HandoffPublishStart(ctx, "server-b", m)
	if got != ctx || parent != "" {
		t.Fatalf("HandoffPublishStart without tracing: a new context, or traceparent %q", parent)
	}
	s.tel.HandoffPublishDone(ctx, m.Kind, nil)
	s.tel.HandoffPublishDone(ctx, telemetry.MsgOther, nil) // counted nowhere
	m.Peer = "server-a"
	if got := s.tel.HandoffProcessStart(ctx, m); got != ctx {
		t.Fatal("HandoffProcessStart without tracing: a new context")
	}
	telemetry.HandoffProcessDone(ctx)
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
	nilTel.HandoffPublishDone(ctx, telemetry.MsgRequest, nil) // no panic, nothing recorded
}
