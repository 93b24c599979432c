package telemetry_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Example_prometheus exports the metrics to Prometheus. A game server does
// the same with a real HTTP server, and hands the MeterProvider to its Node:
//
//	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{..., MeterProvider: mp})
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Here the Node's part is played by calling the Telemetry directly, and
// the scrape is served to a recorder; it prints the lines of two joins
// (one handed over after 1.5 s, one refused after LockWait) and a takeover.
// Every counter series exists from the start, at 0, so the two other ways
// of a takeover show as well.
// WithoutScopeInfo drops the otel_scope_* labels to keep the lines short.
func Example_prometheus() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(ctx) }()

	tel := telemetry.New(telemetry.Config{MeterProvider: mp, JobID: "server-a"})
	players := tel.Driver("PlayerData")
	players.JoinDone(ctx, 1500*time.Millisecond, telemetry.JoinHandoff, telemetry.JoinLoaded, nil)
	players.JoinDone(ctx, 15*time.Second, telemetry.JoinHandoff, telemetry.JoinRefused, nil)
	players.Takeover(ctx, telemetry.TakeoverStopped)

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "playerdata_join_duration_seconds_count"),
			strings.HasPrefix(line, "playerdata_join_duration_seconds_sum"),
			strings.HasPrefix(line, "playerdata_join_duration_seconds_bucket") && strings.Contains(line, `le="2.5"`),
			strings.HasPrefix(line, "playerdata_takeovers_total"):
			fmt.Println(line)
		}
	}
	// Output:
	// playerdata_join_duration_seconds_bucket{playerdata_driver="PlayerData",playerdata_join_outcome="loaded",playerdata_join_path="handoff",le="2.5"} 1
	// playerdata_join_duration_seconds_sum{playerdata_driver="PlayerData",playerdata_join_outcome="loaded",playerdata_join_path="handoff"} 1.5
	// playerdata_join_duration_seconds_count{playerdata_driver="PlayerData",playerdata_join_outcome="loaded",playerdata_join_path="handoff"} 1
	// playerdata_join_duration_seconds_bucket{playerdata_driver="PlayerData",playerdata_join_outcome="refused",playerdata_join_path="handoff",le="2.5"} 0
	// playerdata_join_duration_seconds_sum{playerdata_driver="PlayerData",playerdata_join_outcome="refused",playerdata_join_path="handoff"} 15
	// playerdata_join_duration_seconds_count{playerdata_driver="PlayerData",playerdata_join_outcome="refused",playerdata_join_path="handoff"} 1
	// playerdata_takeovers_total{playerdata_driver="PlayerData",playerdata_takeover_how="aged"} 0
	// playerdata_takeovers_total{playerdata_driver="PlayerData",playerdata_takeover_how="own_run"} 0
	// playerdata_takeovers_total{playerdata_driver="PlayerData",playerdata_takeover_how="stopped"} 1
}
