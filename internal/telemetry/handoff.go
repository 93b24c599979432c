package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// maxTraceStateBytes is the bus's limit (512 bytes): a longer tracestate
// is not sent (W3C Trace Context lets a platform drop it), since a message
// carrying it would not encode.
const maxTraceStateBytes = 512

// Message is what the handoff spans know of a message between servers
// (a messaging.Message).
type Message struct {
	// Kind is the message's type.
	Kind HandoffMessage
	// Driver and Key name the profile (the key goes on spans only).
	Driver, Key string
	// Peer is the other server: where a sent message goes (the holder of a
	// request, the requester of a reply), or where a received one came from
	// (a request's Requester, else its Sender when set).
	Peer string
	// TraceParent and TraceState are a received message's trace context
	// (messaging.Message's fields of those names); unused on send, where
	// SendSpan.TraceContext gives them.
	TraceParent, TraceState string
}

// SendSpan is one handoff message being published: its span (a messaging
// producer span) and what End counts. The zero SendSpan does nothing.
type SendSpan struct {
	t    *Telemetry
	kind HandoffMessage
	ctx  context.Context
	span trace.Span
}

// StartSend starts the publish of m ("publish <subject template>", a
// producer span, child of the span in ctx: the join's wait for a request,
// the request's processing for a reply). Put SendSpan.TraceContext on the
// message and call End when the publish returns. With tracing off it
// allocates nothing; End still counts.
func (t *Telemetry) StartSend(ctx context.Context, m Message) SendSpan {
	if t == nil || m.Kind >= handoffMessages {
		return SendSpan{}
	}
	s := SendSpan{t: t, kind: m.Kind, ctx: ctx}
	if t.tracingOn() {
		attrs := append(t.messagingAttrs(m, "send", "publish"), t.natsAttrs...)
		if t.natsPrefix != "" {
			attrs = append(attrs, semconv.MessagingDestinationName(t.natsPrefix+"."+m.Peer))
		}
		s.ctx, s.span = t.tracer.Start(parentCtx(ctx), t.spanName("publish"),
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	}
	return s
}

// TraceContext returns the W3C traceparent and tracestate the message
// carries (messaging.Message.TraceParent and TraceState), so that the
// receiver's work joins this trace; both are empty while tracing is off.
func (s SendSpan) TraceContext() (traceparent, tracestate string) {
	if s.span == nil {
		return "", ""
	}
	return Inject(s.ctx)
}

// End counts the message (playerdata.handoff.sent; with error.type when err
// is not nil) and ends the span with err.
func (s SendSpan) End(err error) {
	if s.t == nil {
		return
	}
	failed := 0
	if err != nil {
		failed = 1
	}
	s.t.handoffSent.Add(s.ctx, 1, s.t.sent[s.kind][failed].add...)
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.SetAttributes(errorTypeKey.String("publish_failed"))
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// ProcessSpan is the processing of one received handoff message (a
// messaging consumer span). The zero ProcessSpan does nothing.
type ProcessSpan struct{ span trace.Span }

// StartProcess counts a received message (playerdata.handoff.received) and
// starts the span of its processing ("process <subject template>", a
// consumer span), returning the context to do that work under. Call it once
// the message is known to be for a driver of this server (one that is not
// is a drop: DropUnknownDriver, through RegisterBus). For a
// request, the release and the reply (keep the span open until the reply is
// sent); for a reply, waking the waits.
//
// The span is a child of the sender's span when the message carries a
// traceparent, else of the span in ctx (for a reply from a server that sends
// none, pass the waiting join's context). A child, not a link: the release
// is work done for that one request and its joiner's trace should show it
// inline (its duration is the handoff's critical path). A link would suit a
// span serving many messages; a repeated request here is answered by the
// release already under way, under the first request's span.
func (t *Telemetry) StartProcess(ctx context.Context, m Message) (context.Context, ProcessSpan) {
	if t == nil || m.Kind >= handoffMessages {
		return ctx, ProcessSpan{}
	}
	t.handoffReceived.Add(ctx, 1, t.received[m.Kind].add...)
	if !t.tracingOn() {
		return ctx, ProcessSpan{}
	}
	parent := parentCtx(ctx)
	if m.TraceParent != "" {
		parent = Extract(ctx, m.TraceParent, m.TraceState)
	}
	attrs := append(t.messagingAttrs(m, "process", "process"), t.natsAttrs...)
	if t.ownSubject != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(t.ownSubject))
	}
	var p ProcessSpan
	ctx, p.span = t.tracer.Start(parent, t.spanName("process"),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return ctx, p
}

// End ends the processing.
func (p ProcessSpan) End() {
	if p.span != nil {
		p.span.End()
	}
}

// messagingAttrs are the attributes of a handoff message span, OTel's and
// ours, with room for the NATS ones.
func (t *Telemetry) messagingAttrs(m Message, opType, opName string) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 11)
	return append(a,
		semconv.MessagingOperationTypeKey.String(opType),
		semconv.MessagingOperationName(opName),
		HandoffMessageKey.String(m.Kind.String()),
		DriverKey.String(m.Driver), KeyKey.String(m.Key),
		PeerKey.String(m.Peer), t.jobAttr)
}

// spanName is "<operation> <destination>": the subject template with NATS
// ("publish mygame.CKHandoff.{job}"), else "<operation> handoff".
func (t *Telemetry) spanName(op string) string {
	if t.natsPrefix != "" {
		return op + " " + t.natsPrefix + ".{job}"
	}
	return op + " handoff"
}

// carrier carries one traceparent and tracestate through the W3C
// TraceContext propagator.
type carrier struct{ parent, state string }

// Get returns the value of the traceparent or tracestate header.
func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

// Set sets the traceparent or tracestate header.
func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

// Keys returns the headers the carrier holds.
func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Inject returns the W3C traceparent and tracestate of the span in ctx, for
// a message to carry; both are empty when ctx has no valid span context (no
// SDK installed, or no span). A tracestate longer than a message can carry
// (512 bytes) is left out, as W3C Trace Context allows.
func Inject(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c carrier
	propagation.TraceContext{}.Inject(ctx, &c)
	if len(c.state) > maxTraceStateBytes {
		c.state = ""
	}
	return c.parent, c.state
}

// Extract returns ctx carrying the remote span context of traceparent and
// tracestate (a received message's), for the receiver's span to be its
// child. An empty or invalid traceparent returns ctx unchanged.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	c := carrier{parent: traceparent, state: tracestate}
	return propagation.TraceContext{}.Extract(ctx, &c)
}
