package datadriver

import (
	"testing"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// TestHandoffTraceTranslates: each bus type and presence status reaches
// telemetry as its own kind and status, and a received message's peer is
// where it came from.
func TestHandoffTraceTranslates(t *testing.T) {
	kinds := map[messaging.Type]telemetry.HandoffMessage{messaging.TypeRequest: telemetry.MsgRequest,
		messaging.TypeReply: telemetry.MsgReply, messaging.TypeNotify: telemetry.MsgNotify, messaging.Type("other"): telemetry.MsgOther}
	for typ, want := range kinds {
		if got := handoffKind(typ); got != want {
			t.Errorf("bus type %v is telemetry %v, want %v", typ, got, want)
		}
	}
	statuses := map[presencecore.Status]telemetry.PresenceStatus{presencecore.Unknown: telemetry.PresenceUnknown,
		presencecore.Alive: telemetry.PresenceAlive, presencecore.Stopped: telemetry.PresenceStopped}
	for s, want := range statuses {
		if got := presenceStatus(s); got != want || got.String() != s.String() {
			t.Errorf("presence %v is telemetry %v, want %v", s, got, want)
		}
	}
	req := handoffMessage(messaging.Message{Type: messaging.TypeRequest, Requester: "a", Sender: "relay", TraceParent: "tp"})
	reply := handoffMessage(messaging.Message{Type: messaging.TypeReply, Sender: "b"})
	if req.Peer != "a" || reply.Peer != "b" || req.TraceParent != "tp" {
		t.Errorf("peers: request %q (want its requester a), reply %q (want its sender b); traceparent %q", req.Peer, reply.Peer, req.TraceParent)
	}
	if handoffTrace(nil) != nil {
		t.Error("a nil Telemetry gives a Trace")
	}
}
