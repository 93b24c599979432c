package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// MoveKey marks the span of a move (Profile.MoveTo): true from its start,
// so that KeepWaits (package playerdata/sampling) samples every move, as
// seed 000 traces every handoff: the window with a pending move is where
// the hardest bugs live.
const MoveKey = attribute.Key("playerdata.move")

// MoveIDKey is a move's id (the record's move.id once it flipped).
const MoveIDKey = attribute.Key("playerdata.move.id")

// MoveSpan is the span of one move. The zero MoveSpan does nothing.
type MoveSpan struct{ span trace.Span }

// StartMove starts the span of a move of key to the server to ("move
// <driver>", an internal span carrying the key, the target and the move's
// id, and playerdata.move=true) and returns the context to run it under.
// With tracing off it allocates nothing.
func (d *Driver) StartMove(ctx context.Context, key, to, id string) (context.Context, MoveSpan) {
	if d == nil || !d.t.tracingOn() {
		return ctx, MoveSpan{}
	}
	ctx, s := d.t.tracer.Start(ctx, "move "+d.name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(MoveKey.Bool(true), d.driverAttr, KeyKey.String(key), PeerKey.String(to), MoveIDKey.String(id)))
	return ctx, MoveSpan{span: s}
}

// Step adds an event for a step of the move ("prepare", "accepted",
// "flipped", ...).
func (m MoveSpan) Step(name string) {
	if m.span != nil {
		m.span.AddEvent(name)
	}
}

// End ends the move's span: an error status with err's text unless it is
// nil.
func (m MoveSpan) End(err error) {
	if m.span == nil {
		return
	}
	if err != nil {
		m.span.SetStatus(codes.Error, err.Error())
	}
	m.span.End()
}

// MoveDone records a move's duration (playerdata.move.duration) by how it
// ended.
func (d *Driver) MoveDone(ctx context.Context, dur time.Duration, outcome MoveOutcome) {
	if d == nil || outcome >= moveOutcomes {
		return
	}
	d.t.moveDuration.Record(ctx, dur.Seconds(), d.move[outcome].rec...)
}
