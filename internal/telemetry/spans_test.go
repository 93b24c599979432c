package telemetry_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanNamed returns the only span called name.
func spanNamed(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1 (spans: %v)", len(found), name, names(spans))
	}
	return found[0]
}

// names lists the spans' names.
func names(spans tracetest.SpanStubs) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

// attr returns the value of key on s, or "" when it has none.
func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// wantAttrs fails unless s has each key with its value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, kv map[attribute.Key]string) {
	t.Helper()
	for k, v := range kv {
		if got := attr(s, k); got != v {
			t.Errorf("%s: %s=%q, want %q", s.Name, k, got, v)
		}
	}
}

// childOf fails unless child's parent is parent.
func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("%s is not a child of %s", child.Name, parent.Name)
	}
}

// TestJoinSpanFree: a join that did not wait is one span with one child per
// acquire attempt, following the database conventions.
func TestJoinSpanFree(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	d := s.tel.Driver("PlayerData")
	ctx := d.StartJoin(context.Background(), secretKey)
	_, a := d.StartAcquire(ctx)
	a.End(telemetry.AcquireTaken, "", nil)
	d.JoinDone(ctx, time.Millisecond, telemetry.JoinFree, telemetry.JoinLoaded, nil)

	spans := s.spans.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("spans %v, want join and acquire", names(spans))
	}
	join := spanNamed(t, spans, "join PlayerData")
	acq := spanNamed(t, spans, "EVALSHA acquire")
	childOf(t, acq, join)
	wantAttrs(t, join, map[attribute.Key]string{
		telemetry.DriverKey: "PlayerData", telemetry.KeyKey: secretKey, telemetry.JobKey: "server-a",
		telemetry.JoinPathKey: "free", telemetry.JoinOutcomeKey: "loaded", telemetry.WaitKey: "",
	})
	wantAttrs(t, acq, map[attribute.Key]string{
		"db.system.name": "redis", "db.operation.name": "EVALSHA", "db.query.summary": "EVALSHA acquire",
		telemetry.AcquireOutcomeKey: "taken",
	})
	if acq.SpanKind != trace.SpanKindClient || join.SpanKind != trace.SpanKindInternal {
		t.Errorf("kinds: acquire %v, join %v", acq.SpanKind, join.SpanKind)
	}
	if join.Status.Code != codes.Unset {
		t.Errorf("join status %v", join.Status)
	}
}

// TestJoinSpanWaitedSampled: a sampled join that waits keeps its span, now
// marked playerdata.wait, and every step of the wait is its child.
func TestJoinSpanWaitedSampled(t *testing.T) {
	s := newSDK(t, "server-a", "game.CKHandoff", nil)
	d := s.tel.Driver("PlayerData")
	jctx := d.StartJoin(context.Background(), secretKey)
	actx, a := d.StartAcquire(jctx)
	_ = actx
	a.End(telemetry.AcquireLocked, "server-b", nil)
	wctx := d.StartWait(jctx, telemetry.WaitOtherServer)
	s.tel.StartSend(wctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey, Peer: "server-b"}).End(nil)
	_, pr := s.tel.StartPresenceRead(wctx, "server-b")
	pr.End(telemetry.PresenceStopped, 0, nil)
	d.TakeoverDecision(wctx, telemetry.TakeoverStopped, "server-b")
	wctx = d.StartWait(wctx, telemetry.WaitOtherServer) // the next loop of the acquire: no new event
	_, a = d.StartAcquire(wctx)
	a.End(telemetry.AcquireTaken, "", nil)
	d.Takeover(wctx, telemetry.TakeoverStopped)
	d.JoinDone(jctx, 11*time.Second, telemetry.JoinTakeover, telemetry.JoinLoaded, nil)

	spans := s.spans.GetSpans()
	join := spanNamed(t, spans, "join PlayerData")
	wantAttrs(t, join, map[attribute.Key]string{telemetry.WaitKey: "true", telemetry.WaitOnKey: "other_server",
		telemetry.JoinPathKey: "takeover"})
	for _, sp := range spans {
		if sp.Name != join.Name {
			childOf(t, sp, join)
		}
	}
	if len(spans) != 6 {
		t.Errorf("spans %v, want join, 2 acquires, publish, presence read, decision", names(spans))
	}
	var events []string
	for _, e := range join.Events {
		events = append(events, e.Name)
	}
	if strings.Join(events, ",") != "wait,takeover" {
		t.Errorf("join events %v, want wait, takeover", events)
	}
	pres := spanNamed(t, spans, "EVALSHA presence.read")
	wantAttrs(t, pres, map[attribute.Key]string{telemetry.HolderKey: "server-b", telemetry.PresenceStatusKey: "stopped"})
	dec := spanNamed(t, spans, "takeover decision")
	wantAttrs(t, dec, map[attribute.Key]string{telemetry.HolderKey: "server-b", telemetry.TakeoverKey: "stopped"})
}

// TestJoinRefusedStatus: a refused join's span is an error with its cause.
func TestJoinRefusedStatus(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	d := s.tel.Driver("PlayerData")
	ctx := d.StartJoin(context.Background(), secretKey)
	d.JoinDone(ctx, 15*time.Second, telemetry.JoinHandoff, telemetry.JoinRefused, errBoom)
	join := spanNamed(t, s.spans.GetSpans(), "join PlayerData")
	if join.Status.Code != codes.Error || join.Status.Description != "boom" {
		t.Errorf("status %v, want error boom", join.Status)
	}
	wantAttrs(t, join, map[attribute.Key]string{"error.type": "refused", telemetry.JoinOutcomeKey: "refused"})
}

// TestWriteSpan: a write span carries its kind, key and outcome, and End
// records the metric.
func TestWriteSpan(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	d := s.tel.Driver("PlayerData")
	_, w := d.StartWrite(context.Background(), telemetry.WriteRelease, secretKey)
	w.End(telemetry.WriteLockLost, 3*time.Millisecond, errBoom)
	sp := spanNamed(t, s.spans.GetSpans(), "EVALSHA save")
	wantAttrs(t, sp, map[attribute.Key]string{telemetry.WriteKindKey: "release", telemetry.WriteOutcomeKey: "lock_lost",
		telemetry.KeyKey: secretKey, "error.type": "lock_lost", "db.system.name": "redis"})
	if sp.Status.Code != codes.Error {
		t.Errorf("status %v", sp.Status)
	}
	if _, ok := s.collect(t)["playerdata.write.duration"]; !ok {
		t.Error("no write metric")
	}
}

// TestHandoffTraceAcrossServers: the release on the holder joins the
// joiner's trace through the request's traceparent, and the joiner's
// processing of the reply joins it through the reply's.
func TestHandoffTraceAcrossServers(t *testing.T) {
	a := newSDK(t, "server-a", "game.CKHandoff", nil)
	// The holder samples nothing of its own: it follows the joiner.
	b := newSDK(t, "server-b", "game.CKHandoff", sdktrace.ParentBased(sdktrace.NeverSample()))
	da, db := a.tel.Driver("PlayerData"), b.tel.Driver("PlayerData")

	jctx := da.StartJoin(context.Background(), secretKey)
	wctx := da.StartWait(jctx, telemetry.WaitOtherServer)
	send := a.tel.StartSend(wctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey, Peer: "server-b"})
	tp, ts := send.TraceContext()
	send.End(nil)

	// On the holder: the request arrives with tp.
	pctx, proc := b.tel.StartProcess(context.Background(), telemetry.Message{Kind: telemetry.MsgRequest,
		Driver: "PlayerData", Key: secretKey, Peer: "server-a", TraceParent: tp, TraceState: ts})
	_, w := db.StartWrite(pctx, telemetry.WriteRelease, secretKey)
	w.End(telemetry.WriteOK, time.Millisecond, nil)
	reply := b.tel.StartSend(pctx, telemetry.Message{Kind: telemetry.MsgReply, Driver: "PlayerData", Key: secretKey, Peer: "server-a"})
	rtp, rts := reply.TraceContext()
	reply.End(nil)
	proc.End()

	// Back on the joiner.
	_, rproc := a.tel.StartProcess(wctx, telemetry.Message{Kind: telemetry.MsgReply, Driver: "PlayerData", Key: secretKey,
		Peer: "server-b", TraceParent: rtp, TraceState: rts})
	rproc.End()
	da.JoinDone(jctx, time.Millisecond, telemetry.JoinHandoff, telemetry.JoinLoaded, nil)

	as, bs := a.spans.GetSpans(), b.spans.GetSpans()
	join := spanNamed(t, as, "join PlayerData")
	pub := spanNamed(t, as, "publish game.CKHandoff.{job}")
	aproc := spanNamed(t, as, "process game.CKHandoff.{job}")
	bproc := spanNamed(t, bs, "process game.CKHandoff.{job}")
	bsave := spanNamed(t, bs, "EVALSHA save")
	bpub := spanNamed(t, bs, "publish game.CKHandoff.{job}")
	childOf(t, pub, join)
	childOf(t, bproc, pub)
	childOf(t, bsave, bproc)
	childOf(t, bpub, bproc)
	childOf(t, aproc, bpub)
	if !bproc.Parent.IsRemote() {
		t.Error("the holder's span should have a remote parent")
	}
	if pub.SpanKind != trace.SpanKindProducer || bproc.SpanKind != trace.SpanKindConsumer {
		t.Errorf("kinds: publish %v, process %v", pub.SpanKind, bproc.SpanKind)
	}
	wantAttrs(t, pub, map[attribute.Key]string{
		"messaging.system": "nats", "messaging.operation.type": "send", "messaging.operation.name": "publish",
		"messaging.destination.name": "game.CKHandoff.server-b", "messaging.destination.template": "game.CKHandoff.{job}",
		telemetry.HandoffMessageKey: "request", telemetry.PeerKey: "server-b", telemetry.JobKey: "server-a",
	})
	wantAttrs(t, bproc, map[attribute.Key]string{
		"messaging.system": "nats", "messaging.operation.type": "process",
		"messaging.destination.name": "game.CKHandoff.server-b", telemetry.PeerKey: "server-a", telemetry.JobKey: "server-b",
	})

	sum := func(s *sdk, name, msg string) int64 { // over the series of msg: published and failed
		var n int64
		for _, p := range s.collect(t)[name].Data.(metricdataSum).DataPoints {
			if v, _ := p.Attributes.Value(telemetry.HandoffMessageKey); v.AsString() == msg {
				n += p.Value
			}
		}
		return n
	}
	if sum(a, "playerdata.handoff.sent", "request") != 1 || sum(b, "playerdata.handoff.received", "request") != 1 ||
		sum(b, "playerdata.handoff.sent", "reply") != 1 || sum(a, "playerdata.handoff.received", "reply") != 1 {
		t.Error("handoff counts: want one request sent by A and received by B, one reply back")
	}
}

// TestProcessWithoutTraceParent: a message from a server that sends no
// trace context is processed under the span in ctx.
func TestProcessWithoutTraceParent(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	d := s.tel.Driver("PlayerData")
	jctx := d.StartJoin(context.Background(), secretKey)
	_, p := s.tel.StartProcess(jctx, telemetry.Message{Kind: telemetry.MsgReply, Driver: "PlayerData", Key: secretKey, Peer: "server-b"})
	p.End()
	d.JoinDone(jctx, time.Millisecond, telemetry.JoinHandoff, telemetry.JoinLoaded, nil)
	spans := s.spans.GetSpans()
	childOf(t, spanNamed(t, spans, "process handoff"), spanNamed(t, spans, "join PlayerData"))
}

// traceParentRE is a version 00 W3C traceparent.
var traceParentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)

// TestInjectExtract: a span context survives the trip through a message.
func TestInjectExtract(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	ctx, span := s.tp.Tracer("test").Start(context.Background(), "sender")
	defer span.End()
	ts, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		t.Fatal(err)
	}
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(ts))

	tp, state := telemetry.Inject(ctx)
	if !traceParentRE.MatchString(tp) || state != "vendor=abc,other=1" {
		t.Fatalf("Inject: %q %q", tp, state)
	}
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), tp, state))
	want := trace.SpanContextFromContext(ctx).WithRemote(true)
	if !got.Equal(want) {
		t.Errorf("round trip: %v, want %v", got, want)
	}

	if tp, ts := telemetry.Inject(context.Background()); tp != "" || ts != "" {
		t.Errorf("no span: %q %q", tp, ts)
	}
	bg := context.Background()
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if c := telemetry.Extract(bg, bad, ""); trace.SpanContextFromContext(c).IsValid() {
			t.Errorf("Extract(%q) gave a span context", bad)
		}
	}

	long, _ := trace.ParseTraceState("a=" + strings.Repeat("x", 250) + ",b=" + strings.Repeat("y", 250) + ",c=" + strings.Repeat("z", 100))
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(long))
	if tp, state := telemetry.Inject(ctx); tp == "" || state != "" {
		t.Errorf("a tracestate over 512 bytes should be left out: %q, %d bytes", tp, len(state))
	}
}

// TestNilSafety: a nil Telemetry, a nil Driver and zero handles do nothing.
func TestNilSafety(t *testing.T) {
	var tel *telemetry.Telemetry
	ctx := context.Background()
	d := tel.Driver("PlayerData")
	if d != nil {
		t.Fatal("nil Telemetry gave a Driver")
	}
	exercise(ctx, tel)
	hotPath(ctx, tel, d)
	if got := d.StartJoin(ctx, "k"); got != ctx {
		t.Error("StartJoin changed ctx")
	}
	if got := d.StartWait(ctx, telemetry.WaitSameServer); got != ctx {
		t.Error("StartWait changed ctx")
	}
	telemetry.AcquireSpan{}.End(telemetry.AcquireTaken, "", nil)
	telemetry.WriteSpan{}.End(telemetry.WriteOK, 0, nil)
	telemetry.PresenceSpan{}.End(telemetry.PresenceAlive, 0, nil)
	telemetry.SendSpan{}.End(nil)
	if tp, ts := (telemetry.SendSpan{}).TraceContext(); tp != "" || ts != "" {
		t.Error("zero SendSpan has a trace context")
	}
	telemetry.ProcessSpan{}.End()
	tel.RegisterBus(nil)()
	d.RegisterProfiles(nil)()

	// A real Driver with spans on, called without a join in ctx.
	s := newSDK(t, "server-a", "", nil)
	rd := s.tel.Driver("PlayerData")
	rd.StartWait(ctx, telemetry.WaitOtherServer)
	rd.JoinDone(ctx, time.Second, telemetry.JoinFree, telemetry.JoinLoaded, nil)
	rd.LockLost(ctx, telemetry.LossAged)
}
