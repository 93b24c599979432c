package telemetry

import (
	"context"
	"time"
)

// The handoff's hooks, in telemetry's own terms: the Node adapts its
// lockhandoff.Trace to them (datadriver/handofftrace.go), so this package
// knows nothing of the bus's or presence's types. Each Start puts the span
// it opens in the context it returns only while tracing is on, so with
// tracing off they allocate nothing and the Done funcs only count.

// The spans the Start funcs opened, in the contexts they returned.
type (
	sendSpanKey     struct{}
	processSpanKey  struct{}
	presenceSpanKey struct{}
)

// HandoffPublishStart starts the publish of handoff message m to the server
// to (m.Peer is set from it) and returns the context for
// HandoffPublishDone and the trace context the message carries on the wire
// ("" without a sampled span).
func (t *Telemetry) HandoffPublishStart(ctx context.Context, to string, m Message) (context.Context, string, string) {
	m.Peer = to
	s := t.StartSend(ctx, m)
	parent, state := s.TraceContext()
	if s.span == nil {
		return ctx, parent, state
	}
	return context.WithValue(s.ctx, sendSpanKey{}, s), parent, state
}

// HandoffPublishDone ends the publish HandoffPublishStart began in ctx (or,
// with tracing off, counts a message of kind): err is the publish's error.
func (t *Telemetry) HandoffPublishDone(ctx context.Context, kind HandoffMessage, err error) {
	s, ok := ctx.Value(sendSpanKey{}).(SendSpan)
	if !ok {
		if s = (SendSpan{t: t, kind: kind, ctx: ctx}); s.kind >= handoffMessages || t == nil {
			return
		}
	}
	s.End(err)
}

// HandoffProcessStart starts the processing of received handoff message m
// (m.Peer: where it came from) and returns the context for
// HandoffProcessDone.
func (t *Telemetry) HandoffProcessStart(ctx context.Context, m Message) context.Context {
	pctx, p := t.StartProcess(ctx, m)
	if p.span == nil {
		return ctx
	}
	return context.WithValue(pctx, processSpanKey{}, p)
}

// HandoffProcessDone ends the processing HandoffProcessStart began in ctx.
func HandoffProcessDone(ctx context.Context) {
	if p, ok := ctx.Value(processSpanKey{}).(ProcessSpan); ok {
		p.End()
	}
}

// HandoffReadStart starts a proving presence read of server job and
// returns the context for HandoffReadDone.
func (t *Telemetry) HandoffReadStart(ctx context.Context, job string) context.Context {
	rctx, p := t.StartPresenceRead(ctx, job)
	if p.span == nil {
		return ctx
	}
	return context.WithValue(rctx, presenceSpanKey{}, p)
}

// HandoffReadDone ends the read HandoffReadStart began in ctx with what it
// found.
func HandoffReadDone(ctx context.Context, status PresenceStatus, expiresIn time.Duration, err error) {
	if p, ok := ctx.Value(presenceSpanKey{}).(PresenceSpan); ok {
		p.End(status, expiresIn, err)
	}
}
