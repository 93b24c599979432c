package datadriver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ckernel/playerdata/datadriver"
)

// Example_prometheus exports a Node's metrics to Prometheus: an OTel SDK
// MeterProvider whose reader is the Prometheus exporter, registered in a
// Prometheus registry that an HTTP handler serves at /metrics. The example
// joins, saves and releases one profile, scrapes the handler as Prometheus
// would, and prints the families it found and the samples that count
// events (durations vary from run to run). WithoutScopeInfo only shortens
// the lines here (no otel_scope_* labels); the dashboard
// (dashboards/playerdata.json) works either way.
func Example_prometheus() {
	ctx := context.Background()

	// Once per process: the registry Prometheus scrapes, and the SDK
	// MeterProvider that fills it.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { _ = mp.Shutdown(ctx) }()
	// A game server serves it on its own port:
	//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	mr, _ := miniredis.Run() // any Redis: a real one in production
	defer mr.Close()
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: "server-a", Redis: redis.NewClient(&redis.Options{Addr: mr.Addr()}), Namespace: "mygame",
		MeterProvider: mp, // or otel.SetMeterProvider(mp) and leave it nil
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	type Player struct{ Coins int }
	players, err := datadriver.NewDriver(node, datadriver.Config[Player]{Name: "PlayerData"})
	if err != nil {
		panic(err)
	}

	p, err := players.Join(ctx, "user:42")
	if err != nil {
		panic(err)
	}
	_ = p.Update(func(d *Player) { d.Coins += 5 })
	if err := p.Save(ctx); err != nil {
		panic(err)
	}
	if err := p.Release(ctx); err != nil {
		panic(err)
	}

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE playerdata_"),
			strings.HasPrefix(line, "playerdata_") && strings.Contains(line, "_count{"),
			strings.HasPrefix(line, "playerdata_profiles{"):
			fmt.Println(line)
		}
	}
	// Output:
	// # TYPE playerdata_bus_connection_events_total counter
	// # TYPE playerdata_bus_dropped_total counter
	// # TYPE playerdata_fence_sessions_total counter
	// # TYPE playerdata_fences_total counter
	// # TYPE playerdata_handoff_received_total counter
	// # TYPE playerdata_handoff_sent_total counter
	// # TYPE playerdata_history_trimmed_total counter
	// # TYPE playerdata_join_duration_seconds histogram
	// playerdata_join_duration_seconds_count{playerdata_driver="PlayerData",playerdata_join_outcome="loaded",playerdata_join_path="free"} 1
	// # TYPE playerdata_lock_losses_total counter
	// # TYPE playerdata_messages_applied_total counter
	// # TYPE playerdata_messages_dead_lettered_total counter
	// # TYPE playerdata_messages_sent_total counter
	// # TYPE playerdata_profiles gauge
	// playerdata_profiles{playerdata_driver="PlayerData",playerdata_profile_state="live"} 0
	// playerdata_profiles{playerdata_driver="PlayerData",playerdata_profile_state="retained"} 0
	// # TYPE playerdata_takeovers_total counter
	// # TYPE playerdata_write_duration_seconds histogram
	// playerdata_write_duration_seconds_count{playerdata_driver="PlayerData",playerdata_write_kind="release",playerdata_write_outcome="ok"} 1
	// playerdata_write_duration_seconds_count{playerdata_driver="PlayerData",playerdata_write_kind="save",playerdata_write_outcome="ok"} 1
}
