package telemetry

import (
	"context"

	"github.com/ckernel/playerdata/lockhandoff"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/presence"
)

// HandoffTrace is the lockhandoff.Trace that records a Handoff's work with
// t: each message sent (StartSend), each message taken up (StartProcess)
// and each proving presence read (StartPresenceRead). Its Start funcs put
// the span they open in the context they return only while tracing is on,
// so with tracing off they allocate nothing and the Done funcs only count.
// A nil t gives a nil Trace.
func (t *Telemetry) HandoffTrace() *lockhandoff.Trace {
	if t == nil {
		return nil
	}
	return &lockhandoff.Trace{
		PublishStart: t.publishStart,
		PublishDone:  t.publishDone,
		ProcessStart: t.processStart,
		ProcessDone:  processDone,
		ReadStart:    t.readStart,
		ReadDone:     readDone,
	}
}

// The spans a HandoffTrace's Start funcs opened, in the contexts they
// returned.
type (
	sendSpanKey     struct{}
	processSpanKey  struct{}
	presenceSpanKey struct{}
)

// handoffKind is the telemetry kind of a wire message's type
// (handoffMessages, which nothing counts, for another).
func handoffKind(typ messaging.Type) HandoffMessage {
	switch typ {
	case messaging.TypeRequest:
		return MsgRequest
	case messaging.TypeReply:
		return MsgReply
	case messaging.TypeNotify:
		return MsgNotify
	}
	return handoffMessages
}

func (t *Telemetry) publishStart(ctx context.Context, to string, m *messaging.Message) context.Context {
	s := t.StartSend(ctx, Message{Kind: handoffKind(m.Type), Driver: m.Driver, Key: m.Key, Peer: to})
	m.TraceParent, m.TraceState = s.TraceContext()
	if s.span == nil {
		return ctx
	}
	return context.WithValue(s.ctx, sendSpanKey{}, s)
}

func (t *Telemetry) publishDone(ctx context.Context, _ string, m messaging.Message, err error) {
	s, ok := ctx.Value(sendSpanKey{}).(SendSpan)
	if !ok {
		if s = (SendSpan{t: t, kind: handoffKind(m.Type), ctx: ctx}); s.kind >= handoffMessages {
			return
		}
	}
	s.End(err)
}

func (t *Telemetry) processStart(ctx context.Context, m messaging.Message) context.Context {
	peer := m.Sender // where a received message came from: a request's requester, else its sender
	if m.Type == messaging.TypeRequest {
		peer = m.Requester
	}
	pctx, p := t.StartProcess(ctx, Message{Kind: handoffKind(m.Type), Driver: m.Driver, Key: m.Key,
		Peer: peer, TraceParent: m.TraceParent, TraceState: m.TraceState})
	if p.span == nil {
		return ctx
	}
	return context.WithValue(pctx, processSpanKey{}, p)
}

func processDone(ctx context.Context) {
	if p, ok := ctx.Value(processSpanKey{}).(ProcessSpan); ok {
		p.End()
	}
}

func (t *Telemetry) readStart(ctx context.Context, job string) context.Context {
	rctx, p := t.StartPresenceRead(ctx, job)
	if p.span == nil {
		return ctx
	}
	return context.WithValue(rctx, presenceSpanKey{}, p)
}

func readDone(ctx context.Context, r presence.Reading) {
	if p, ok := ctx.Value(presenceSpanKey{}).(PresenceSpan); ok {
		p.End(PresenceStatus(r.Status), r.ExpiresIn, r.Err)
	}
}
