package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Span names. A join's span is named "join <driver>"; the Redis calls follow
// OTel's database conventions (the span name is db.query.summary), the bus's
// follow the messaging ones (see handoff.go).
const (
	acquireSpanName  = "EVALSHA acquire"
	writeSpanName    = "EVALSHA save"
	presenceSpanName = "EVALSHA presence.read"
	decisionSpanName = "takeover decision"
)

// joinKey is the context key of a join's state.
type joinKey struct{}

// joinState is what the span helpers know of one join, kept in its context
// (only while tracing is on). Its spans are ended by JoinDone.
type joinState struct {
	start time.Time
	key   string

	mu     sync.Mutex
	span   trace.Span // the join span as started
	root   trace.Span // the join's sampled stand-in once it waited (see StartWait); nil otherwise
	waited [waitOns]bool
	// last is the latest acquire attempt of a join whose span is not
	// sampled, replayed under the stand-in when the join turns out to wait.
	last attemptRecord
}

// attemptRecord is one finished acquire attempt.
type attemptRecord struct {
	set        bool
	start, end time.Time
	attrs      [2]attribute.KeyValue // outcome, holder
}

// currentLocked is the span that stands for the join now. st.mu held.
func (st *joinState) currentLocked() trace.Span {
	if st.root != nil {
		return st.root
	}
	return st.span
}

// joinFrom returns the join state in ctx, or nil.
func joinFrom(ctx context.Context) *joinState {
	st, _ := ctx.Value(joinKey{}).(*joinState)
	return st
}

// parentCtx returns the context to start a child span from: ctx itself,
// unless its current span is a join span that has a sampled stand-in, in
// which case the stand-in is the parent. So a child started from a context
// taken before the join waited still lands in the kept trace.
func parentCtx(ctx context.Context) context.Context {
	st := joinFrom(ctx)
	if st == nil {
		return ctx
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.root == nil || trace.SpanContextFromContext(ctx).SpanID() != st.span.SpanContext().SpanID() {
		return ctx
	}
	return trace.ContextWithSpan(ctx, st.root)
}

// parent returns the span that parentCtx(ctx) names.
func parent(ctx context.Context) trace.Span { return trace.SpanFromContext(parentCtx(ctx)) }

// StartJoin starts the span of a join of key ("join <driver>") and returns
// the context to run the join under. End it with JoinDone, on every path.
// With tracing off it returns ctx unchanged and allocates nothing.
func (d *Driver) StartJoin(ctx context.Context, key string) context.Context {
	if d == nil || !d.t.tracingOn() {
		return ctx
	}
	st := &joinState{start: time.Now(), key: key}
	ctx, st.span = d.t.tracer.Start(ctx, d.joinName, trace.WithTimestamp(st.start),
		trace.WithAttributes(d.driverAttr, KeyKey.String(key), d.t.jobAttr))
	return context.WithValue(ctx, joinKey{}, st)
}

// StartWait marks the join in ctx as waiting on on and returns the context
// its waiting runs under (pass it on to acquire attempts, lockhandoff.Wait
// and presence reads). Call it where a join starts to wait: on the
// same-server wait, and when an acquire first finds another server's lock.
// Calling it again is cheap: a wait on something new adds an event, a
// repeat does nothing.
//
// A head sampler has decided on the join span when it started, before
// anyone knew it would wait. So when the join span is sampled, StartWait
// sets playerdata.wait=true on it and the wait's spans are its children.
// When it is not, StartWait starts a stand-in: a span of the same name, a
// new root backdated to the join's start, linked to the join span, and
// carrying playerdata.wait=true from its start, which the KeepWaits sampler
// (package github.com/ckernel/playerdata/sampling) always samples. The latest acquire attempt is replayed
// under it, every later span of the join is its child (parentCtx), and
// JoinDone ends it with the join's outcome. A trace of a join that waited
// therefore looks the same whether or not the join was sampled, and is whole
// (no child pointing at a parent that was never exported).
func (d *Driver) StartWait(ctx context.Context, on WaitOn) context.Context {
	if d == nil || on >= waitOns || !d.t.tracingOn() {
		return ctx
	}
	st := joinFrom(ctx)
	if st == nil {
		return ctx
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	onAttr := WaitOnKey.String(on.String())
	first := !st.waited[WaitSameServer] && !st.waited[WaitOtherServer]
	repeat := st.waited[on]
	st.waited[on] = true
	switch {
	case repeat:
	case !first:
		st.currentLocked().AddEvent("wait", trace.WithAttributes(onAttr))
	case st.span.SpanContext().IsSampled():
		st.span.SetAttributes(WaitKey.Bool(true), onAttr)
		st.span.AddEvent("wait", trace.WithAttributes(onAttr))
	default:
		_, st.root = d.t.tracer.Start(ctx, d.joinName, trace.WithNewRoot(), trace.WithTimestamp(st.start),
			trace.WithLinks(trace.Link{SpanContext: st.span.SpanContext()}),
			trace.WithAttributes(WaitKey.Bool(true), onAttr, d.driverAttr, KeyKey.String(st.key), d.t.jobAttr))
		if a := st.last; a.set {
			_, s := d.t.tracer.Start(trace.ContextWithSpan(ctx, st.root), acquireSpanName,
				trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(a.start),
				trace.WithAttributes(redisAttrs("EVALSHA", "EVALSHA acquire")...))
			s.SetAttributes(a.attrs[:]...)
			s.End(trace.WithTimestamp(a.end))
		}
		st.root.AddEvent("wait", trace.WithAttributes(onAttr))
	}
	return trace.ContextWithSpan(ctx, st.currentLocked())
}

// JoinDone records a join that ended with outcome after dur by path
// (playerdata.join.duration), and ends its spans, found in ctx (the context
// StartJoin returned, or one made from it), with the path, the outcome and
// err. Call it once per join, on every path, from Driver.Join (not from
// Load or RestoreAt: an admin tool's ErrLocked is no refused player).
func (d *Driver) JoinDone(ctx context.Context, dur time.Duration, path JoinPath, outcome JoinOutcome, err error) {
	if d == nil || path >= joinPaths || outcome >= joinOutcomes {
		return
	}
	var st *joinState
	if d.t.tracingOn() {
		st = joinFrom(ctx)
	}
	if st == nil {
		d.t.joinDuration.Record(ctx, dur.Seconds(), d.join[path][outcome].rec...)
		return
	}
	st.mu.Lock()
	sp, standIn := st.currentLocked(), st.root != nil
	st.mu.Unlock()
	// Recorded under the span that stands for the join, so that an
	// exemplar of a slow join points at its kept trace.
	d.t.joinDuration.Record(trace.ContextWithSpan(ctx, sp), dur.Seconds(), d.join[path][outcome].rec...)
	sp.SetAttributes(JoinPathKey.String(path.String()), JoinOutcomeKey.String(outcome.String()))
	switch outcome {
	case JoinRefused, JoinFailed:
		sp.SetAttributes(errorTypeKey.String(outcome.String()))
		sp.SetStatus(codes.Error, errText(err, outcome.String()))
	}
	sp.End()
	if standIn { // spans are not comparable: the SDK's unsampled one holds a TraceState
		st.span.End()
	}
}

// errText is err's text, or what when err is nil.
func errText(err error, what string) string {
	if err == nil {
		return what
	}
	return err.Error()
}

// redisAttrs are the database attributes of a Redis call.
func redisAttrs(op, summary string) []attribute.KeyValue {
	return []attribute.KeyValue{semconv.DBSystemNameRedis, semconv.DBOperationName(op), semconv.DBQuerySummary(summary)}
}

// AcquireSpan is the span of one acquire attempt (acquire.lua). The zero
// AcquireSpan does nothing.
type AcquireSpan struct {
	span  trace.Span
	st    *joinState
	start time.Time
}

// StartAcquire starts the span of one acquire attempt ("EVALSHA acquire",
// a Redis client span) and returns the context to run it under. With
// tracing off it returns ctx and a zero AcquireSpan, allocating nothing.
func (d *Driver) StartAcquire(ctx context.Context) (context.Context, AcquireSpan) {
	if d == nil || !d.t.tracingOn() {
		return ctx, AcquireSpan{}
	}
	a := AcquireSpan{st: joinFrom(ctx), start: time.Now()}
	ctx, a.span = d.t.tracer.Start(parentCtx(ctx), acquireSpanName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(a.start), trace.WithAttributes(redisAttrs("EVALSHA", "EVALSHA acquire")...))
	return ctx, a
}

// End ends the attempt: what it met, the JobID of the holder it found
// (empty when it took the lock) and the call's error.
func (a AcquireSpan) End(outcome AcquireOutcome, holder string, err error) {
	if a.span == nil {
		return
	}
	end := time.Now()
	attrs := [2]attribute.KeyValue{AcquireOutcomeKey.String(outcome.String()), HolderKey.String(holder)}
	a.span.SetAttributes(attrs[:]...)
	if err != nil {
		a.span.SetAttributes(errorTypeKey.String(outcome.String()))
		a.span.SetStatus(codes.Error, err.Error())
	}
	a.span.End(trace.WithTimestamp(end))
	if st := a.st; st != nil && !a.span.SpanContext().IsSampled() {
		st.mu.Lock()
		if st.root == nil {
			st.last = attemptRecord{set: true, start: a.start, end: end, attrs: attrs}
		}
		st.mu.Unlock()
	}
}

// TakeoverDecision records the decision to take the lock of holder without
// its release (a zero-length "takeover decision" span): call it when a
// lockhandoff.Wait answers an Attempt with StealJob (TakeoverStopped) or
// NotAliveToken (TakeoverAged), or an acquire finds its own earlier run's
// lock (TakeoverOwnRun). The acquire that follows may still be refused; its
// AcquireSpan says so, and Takeover counts the ones that landed.
func (d *Driver) TakeoverDecision(ctx context.Context, how TakeoverHow, holder string) {
	if d == nil || how >= takeoverHows || !d.t.tracingOn() {
		return
	}
	_, s := d.t.tracer.Start(parentCtx(ctx), decisionSpanName,
		trace.WithAttributes(TakeoverKey.String(how.String()), HolderKey.String(holder), d.driverAttr))
	s.End()
}

// WriteSpan is one write of a record: its span, and what WriteDone needs.
// The zero WriteSpan does nothing.
type WriteSpan struct {
	d    *Driver
	ctx  context.Context
	kind WriteKind
	span trace.Span
}

// StartWrite starts a write of kind of key's record: its span ("EVALSHA
// save", a Redis client span carrying the key) while tracing is on, and
// returns the context to run it under. With tracing off it allocates
// nothing; End still records the metric.
func (d *Driver) StartWrite(ctx context.Context, kind WriteKind, key string) (context.Context, WriteSpan) {
	if d == nil {
		return ctx, WriteSpan{}
	}
	w := WriteSpan{d: d, ctx: ctx, kind: kind}
	if d.t.tracingOn() {
		ctx, w.span = d.t.tracer.Start(parentCtx(ctx), writeSpanName, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(redisAttrs("EVALSHA", "EVALSHA save")...),
			trace.WithAttributes(WriteKindKey.String(kind.String()), d.driverAttr, KeyKey.String(key)))
		w.ctx = ctx
	}
	return ctx, w
}

// End records the write (WriteDone: playerdata.write.duration) and ends its
// span with outcome and err.
func (w WriteSpan) End(outcome WriteOutcome, dur time.Duration, err error) {
	if w.d == nil {
		return
	}
	w.d.WriteDone(w.ctx, w.kind, outcome, dur)
	if w.span == nil {
		return
	}
	w.span.SetAttributes(WriteOutcomeKey.String(outcome.String()))
	if outcome != WriteOK {
		w.span.SetAttributes(errorTypeKey.String(outcome.String()))
		w.span.SetStatus(codes.Error, errText(err, outcome.String()))
	}
	w.span.End()
}

// PresenceSpan is the span of one presence read. The zero PresenceSpan does
// nothing.
type PresenceSpan struct{ span trace.Span }

// StartPresenceRead starts the span of a read of holder's presence
// ("EVALSHA presence.read", a Redis client span) and returns the context to
// run it under. With tracing off it allocates nothing.
func (t *Telemetry) StartPresenceRead(ctx context.Context, holder string) (context.Context, PresenceSpan) {
	if !t.tracingOn() {
		return ctx, PresenceSpan{}
	}
	var p PresenceSpan
	ctx, p.span = t.tracer.Start(parentCtx(ctx), presenceSpanName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(redisAttrs("EVALSHA", "EVALSHA presence.read")...),
		trace.WithAttributes(HolderKey.String(holder)))
	return ctx, p
}

// End ends the read with what it found: the status, how long until an alive
// holder's beat can expire, and the read's error.
func (p PresenceSpan) End(status PresenceStatus, expiresIn time.Duration, err error) {
	if p.span == nil {
		return
	}
	p.span.SetAttributes(PresenceStatusKey.String(status.String()))
	if status == PresenceAlive {
		p.span.SetAttributes(PresenceExpiresKey.Float64(expiresIn.Seconds()))
	}
	if err != nil {
		p.span.SetAttributes(errorTypeKey.String("error"))
		p.span.SetStatus(codes.Error, err.Error())
	}
	p.span.End()
}
