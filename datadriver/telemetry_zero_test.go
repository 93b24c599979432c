package datadriver_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// TestCountersExistFromTheStart: right after NewNode and NewDriver, before
// any session, every counter of the dashboard is exported at 0 (and the
// profiles gauge at 0), so no panel shows "No data" until a first fence,
// takeover or lock loss.
func TestCountersExistFromTheStart(t *testing.T) {
	r := testsupport.StartRedis(t)
	n := testsupport.StartNATS(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ctx := context.Background()
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: "server-a", Redis: r.Client(t), NATS: n.Connect(t), Namespace: r.Namespace, MeterProvider: mp,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	if _, err := datadriver.NewDriver(node, datadriver.Config[struct{ Coins int }]{Name: "PlayerData"}); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	points := map[string][]metricdata.DataPoint[int64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				points[m.Name] = s.DataPoints
			}
		}
	}
	for name, perDriver := range map[string]bool{
		"playerdata.lock.losses": true, "playerdata.takeovers": true, "playerdata.messages.sent": true,
		"playerdata.messages.applied": true, "playerdata.profiles": true,
		"playerdata.handoff.sent": false, "playerdata.handoff.received": false, "playerdata.fences": false,
		"playerdata.fence.sessions": false, "playerdata.bus.dropped": false, "playerdata.bus.connection.events": false,
	} {
		ps, ok := points[name]
		if !ok || len(ps) == 0 {
			t.Errorf("%s: not exported before its first event", name)
			continue
		}
		for _, p := range ps {
			if p.Value != 0 {
				t.Errorf("%s%v = %d before any session, want 0", name, p.Attributes.ToSlice(), p.Value)
			}
			if d, _ := p.Attributes.Value("playerdata.driver"); perDriver && d.AsString() != "PlayerData" {
				t.Errorf("%s%v: want the driver's name on it", name, p.Attributes.ToSlice())
			}
		}
	}
}
