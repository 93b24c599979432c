package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// noopCases are the Telemetries that must cost no allocation: none at all,
// the global providers with no SDK installed (this test binary installs
// none in-process), and explicit no-op providers.
func noopCases() []struct {
	name string
	tel  *telemetry.Telemetry
} {
	return []struct {
		name string
		tel  *telemetry.Telemetry
	}{
		{"nil", nil},
		{"global", telemetry.New(telemetry.Config{JobID: "server-a", NATSPrefix: "game.CKHandoff"})},
		{"noop", telemetry.New(telemetry.Config{MeterProvider: metricnoop.NewMeterProvider(),
			TracerProvider: tracenoop.NewTracerProvider(), JobID: "server-a"})},
	}
}

// hotPath is every call of a session cycle with a handoff, a wait and a
// takeover: what a Node makes per join, save and release.
func hotPath(ctx context.Context, tel *telemetry.Telemetry, d *telemetry.Driver) {
	jctx := d.StartJoin(ctx, secretKey)
	actx, a := d.StartAcquire(jctx)
	a.End(telemetry.AcquireLocked, "server-b", nil)
	wctx := d.StartWait(actx, telemetry.WaitOtherServer)
	s := tel.StartSend(wctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey, Peer: "server-b"})
	tp, ts := s.TraceContext()
	s.End(nil)
	rctx, r := tel.StartProcess(wctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey,
		Peer: "server-b", TraceParent: tp, TraceState: ts})
	r.End()
	_, pr := tel.StartPresenceRead(rctx, "server-b")
	pr.End(telemetry.PresenceStopped, 0, nil)
	d.TakeoverDecision(wctx, telemetry.TakeoverStopped, "server-b")
	d.Takeover(wctx, telemetry.TakeoverStopped)
	d.JoinDone(jctx, 3*time.Second, telemetry.JoinTakeover, telemetry.JoinLoaded, nil)
	_, w := d.StartWrite(ctx, telemetry.WriteSave, secretKey)
	w.End(telemetry.WriteOK, time.Millisecond, nil)
	_, w = d.StartWrite(ctx, telemetry.WriteRelease, secretKey)
	w.End(telemetry.WriteLockLost, time.Millisecond, errBoom)
	d.WriteDone(ctx, telemetry.WriteAutosave, telemetry.WriteOK, time.Millisecond)
	d.LockLost(ctx, telemetry.LossTaken)
	d.MessageSent(ctx, telemetry.SendOK)
	d.MessagesApplied(ctx, 1)
	tel.Fenced(ctx, 1)
	_, _ = telemetry.Inject(wctx)
	_ = telemetry.Extract(ctx, "", "")
}

// TestNoopAllocs: with no SDK installed the hot path allocates nothing.
func TestNoopAllocs(t *testing.T) {
	for _, c := range noopCases() {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := c.tel.Driver("PlayerData")
			if allocs := testing.AllocsPerRun(100, func() { hotPath(ctx, c.tel, d) }); allocs != 0 {
				t.Errorf("%v allocations per session cycle, want 0", allocs)
			}
		})
	}
}

// BenchmarkNoop is the cost of the instrumentation of one session cycle
// (hotPath: 26 calls) when no SDK is installed.
func BenchmarkNoop(b *testing.B) {
	for _, c := range noopCases() {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			d := c.tel.Driver("PlayerData")
			b.ReportAllocs()
			for b.Loop() {
				hotPath(ctx, c.tel, d)
			}
		})
	}
}

// BenchmarkSDK is the same cycle with the SDK installed, everything sampled
// and exported in memory: for comparison only.
func BenchmarkSDK(b *testing.B) {
	s := newSDK(b, "server-a", "game.CKHandoff", nil)
	ctx := context.Background()
	d := s.tel.Driver("PlayerData")
	b.ReportAllocs()
	for b.Loop() {
		hotPath(ctx, s.tel, d)
		s.spans.Reset()
	}
}
