package datadriver

import (
	"context"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// handoffTrace is the handoffcore.Trace that records a Handoff's work with
// t: each message sent, each message taken up and each proving presence
// read, translated from the bus's and presence's types to telemetry's (which
// imports neither). A nil t gives a nil Trace.
func handoffTrace(t *telemetry.Telemetry) *handoffcore.Trace {
	if t == nil {
		return nil
	}
	return &handoffcore.Trace{
		PublishStart: func(ctx context.Context, to string, m *messaging.Message) context.Context {
			ctx, m.TraceParent, m.TraceState = t.HandoffPublishStart(ctx, to, handoffMessage(*m))
			return ctx
		},
		PublishDone: func(ctx context.Context, _ string, m messaging.Message, err error) {
			t.HandoffPublishDone(ctx, handoffKind(m.Type), err)
		},
		ProcessStart: func(ctx context.Context, m messaging.Message) context.Context {
			return t.HandoffProcessStart(ctx, handoffMessage(m))
		},
		ProcessDone: telemetry.HandoffProcessDone,
		ReadStart:   t.HandoffReadStart,
		ReadDone: func(ctx context.Context, r presencecore.Reading) {
			telemetry.HandoffReadDone(ctx, presenceStatus(r.Status), r.ExpiresIn, r.Err)
		},
	}
}

// handoffMessage is what telemetry records of a wire message. Its peer is
// where a received message came from: a request's requester, else its
// sender (a sent one's is set by the publish).
func handoffMessage(m messaging.Message) telemetry.Message {
	peer := m.Sender
	if m.Type == messaging.TypeRequest {
		peer = m.Requester
	}
	return telemetry.Message{Kind: handoffKind(m.Type), Driver: m.Driver, Key: m.Key, Peer: peer,
		TraceParent: m.TraceParent, TraceState: m.TraceState}
}

// handoffKind is the telemetry kind of a wire message's type.
func handoffKind(typ messaging.Type) telemetry.HandoffMessage {
	switch typ {
	case messaging.TypeRequest:
		return telemetry.MsgRequest
	case messaging.TypeReply:
		return telemetry.MsgReply
	case messaging.TypeNotify:
		return telemetry.MsgNotify
	}
	return telemetry.MsgOther
}

// presenceStatus is telemetry's name for a presence reading's status.
func presenceStatus(s presencecore.Status) telemetry.PresenceStatus {
	switch s {
	case presencecore.Alive:
		return telemetry.PresenceAlive
	case presencecore.Stopped:
		return telemetry.PresenceStopped
	}
	return telemetry.PresenceUnknown
}
