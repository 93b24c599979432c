package handoffcore

import (
	"context"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
)

// Trace observes a Handoff's messages and presence reads, for metrics and
// tracing: a datadriver Node gives its telemetry's. Every field is optional.
// Each Start returns the context its work runs under (ctx itself, or one
// carrying a span), and that context is what the matching Done gets. The
// funcs run on the goroutine doing the work (a join's wait, the bus's
// delivery, a publish worker) and must return promptly.
type Trace struct {
	// PublishStart is called as m is queued for server to (before the
	// queue can refuse it); it may set m's TraceParent and TraceState, which
	// the message then carries.
	PublishStart func(ctx context.Context, to string, m *messaging.Message) context.Context
	// PublishDone is called once the publish of m returned err (a message
	// the full queue dropped included).
	PublishDone func(ctx context.Context, to string, m messaging.Message, err error)
	// ProcessStart is called as a message for a driver of this server is
	// taken up: for a request, the release and the reply run under the
	// context it returns; for a reply or a notify, waking the waits.
	ProcessStart func(ctx context.Context, m messaging.Message) context.Context
	// ProcessDone is called once that work is done (a request's, once its
	// reply is sent or given up).
	ProcessDone func(ctx context.Context)
	// ReadStart is called as the presence of job is read to prove it
	// stopped; the read runs under the context it returns.
	ReadStart func(ctx context.Context, job string) context.Context
	// ReadDone is called with what the read found.
	ReadDone func(ctx context.Context, r presencecore.Reading)
}

// The calls of a Trace, each doing nothing for a nil Trace or func.

func (t *Trace) publishStart(ctx context.Context, to string, m *messaging.Message) context.Context {
	if t == nil || t.PublishStart == nil {
		return ctx
	}
	return t.PublishStart(ctx, to, m)
}

func (t *Trace) publishDone(ctx context.Context, to string, m messaging.Message, err error) {
	if t != nil && t.PublishDone != nil {
		t.PublishDone(ctx, to, m, err)
	}
}

func (t *Trace) processStart(ctx context.Context, m messaging.Message) context.Context {
	if t == nil || t.ProcessStart == nil {
		return ctx
	}
	return t.ProcessStart(ctx, m)
}

func (t *Trace) processDone(ctx context.Context) {
	if t != nil && t.ProcessDone != nil {
		t.ProcessDone(ctx)
	}
}

func (t *Trace) readStart(ctx context.Context, job string) context.Context {
	if t == nil || t.ReadStart == nil {
		return ctx
	}
	return t.ReadStart(ctx, job)
}

func (t *Trace) readDone(ctx context.Context, r presencecore.Reading) {
	if t != nil && t.ReadDone != nil {
		t.ReadDone(ctx, r)
	}
}
