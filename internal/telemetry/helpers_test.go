package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// secretKey is the player key every test passes; no metric may carry it.
const secretKey = "user:SECRET-4242"

// sdk is a Telemetry over the SDK, with an in-memory metric reader and span
// exporter.
type sdk struct {
	tel    *telemetry.Telemetry
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
}

// newSDK makes a Telemetry over SDK providers; sampler nil is the SDK's
// default (ParentBased(AlwaysSample)).
func newSDK(t testing.TB, jobID, natsPrefix string, sampler sdktrace.Sampler) *sdk {
	t.Helper()
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSyncer(s.spans)}
	if sampler != nil {
		opts = append(opts, sdktrace.WithSampler(sampler))
	}
	s.tp = sdktrace.NewTracerProvider(opts...)
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = s.tp.Shutdown(context.Background())
	})
	s.tel = telemetry.New(telemetry.Config{MeterProvider: mp, TracerProvider: s.tp, JobID: jobID, NATSPrefix: natsPrefix})
	return s
}

// collect reads every metric, by name.
func (s *sdk) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, telemetry.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// errBoom is a failure the tests report.
var errBoom = errors.New("boom")

// exercise calls every event method at least once and registers both
// callbacks, as a Node would during
// a session cycle with a handoff, with secretKey as the player key.
func exercise(ctx context.Context, tel *telemetry.Telemetry) {
	d := tel.Driver("PlayerData")
	// Left registered, so that a collection after exercise sees them.
	d.RegisterProfiles(func() (int64, int64) { return 3, 1 })
	tel.RegisterBus(func() telemetry.BusStats {
		return telemetry.BusStats{Dropped: [8]uint64{1, 2, 3, 4, 5, 6, 7, 8}, Events: [3]uint64{2, 1, 0}}
	})
	tel.RegisterRedis(func() telemetry.RedisMemory {
		return telemetry.RedisMemory{Known: true, Policy: "noeviction", Used: 1 << 20, Limit: 0}
	})
	d.MessagesDeadLettered(ctx, 1)
	d.HistoryKept(ctx, 4096, 1, 1)
	sessionCycle(ctx, tel, d)
	d.LockLost(ctx, telemetry.LossTaken)
	d.Takeover(ctx, telemetry.TakeoverStopped)
	d.MessageSent(ctx, telemetry.SendOK)
	d.MessagesApplied(ctx, 2)
	tel.Fenced(ctx, 4)
}

// sessionCycle is the hot path: a join with one attempt, a save and a
// release, and a handoff request sent and received.
func sessionCycle(ctx context.Context, tel *telemetry.Telemetry, d *telemetry.Driver) {
	jctx := d.StartJoin(ctx, secretKey)
	actx, a := d.StartAcquire(jctx)
	_ = actx
	a.End(telemetry.AcquireTaken, "", nil)
	d.JoinDone(jctx, 2*time.Millisecond, telemetry.JoinFree, telemetry.JoinLoaded, nil)
	_, w := d.StartWrite(ctx, telemetry.WriteSave, secretKey)
	w.End(telemetry.WriteOK, time.Millisecond, nil)
	_, w = d.StartWrite(ctx, telemetry.WriteRelease, secretKey)
	w.End(telemetry.WriteOK, time.Millisecond, nil)
	d.WriteDone(ctx, telemetry.WriteAutosave, telemetry.WriteTimeout, 10*time.Second)
	s := tel.StartSend(ctx, telemetry.Message{Kind: telemetry.MsgRequest, Driver: "PlayerData", Key: secretKey, Peer: "server-b"})
	_, _ = s.TraceContext()
	s.End(nil)
	pctx, p := tel.StartProcess(ctx, telemetry.Message{Kind: telemetry.MsgReply, Driver: "PlayerData", Key: secretKey, Peer: "server-b"})
	_, pr := tel.StartPresenceRead(pctx, "server-b")
	pr.End(telemetry.PresenceAlive, 3*time.Second, nil)
	p.End()
}

// metricdataSum is the data of a counter.
type metricdataSum = metricdata.Sum[int64]
