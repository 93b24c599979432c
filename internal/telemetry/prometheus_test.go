package telemetry_test

import (
	"bufio"
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// promTelemetry is a Telemetry whose metrics a Prometheus exporter serves
// from its own registry, and the function that scrapes it as Prometheus
// would (text exposition format).
func promTelemetry(t testing.TB) (*telemetry.Telemetry, func() string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel := telemetry.New(telemetry.Config{MeterProvider: mp, JobID: "server-a"})
	scrape := func() string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "text/plain; version=0.0.4")
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, req)
		return rec.Body.String()
	}
	return tel, scrape
}

// promFamily is one metric family as a scrape shows it.
type promFamily struct {
	typ    string
	labels map[string]bool // label names seen on its samples
}

// parseScrape reads the families of a text scrape: their TYPE, and the
// label names of their samples.
func parseScrape(text string) map[string]*promFamily {
	fams := make(map[string]*promFamily)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			fams[name] = &promFamily{typ: typ, labels: make(map[string]bool)}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name, rest = name[:i], ""
		}
		fam := fams[name]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if fam == nil {
				fam = fams[strings.TrimSuffix(name, suffix)]
			}
		}
		if fam == nil {
			continue
		}
		labels, _, _ := strings.Cut(rest, "}")
		for _, kv := range strings.Split(labels, ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				fam.labels[k] = true
			}
		}
	}
	return fams
}

// promMetrics are the names and labels Prometheus shows (besides the scope
// labels otel_scope_*), which the dashboard and the README use.
var promMetrics = map[string]struct {
	typ    string
	labels []string
}{
	"playerdata_join_duration_seconds":        {"histogram", []string{"playerdata_driver", "playerdata_join_path", "playerdata_join_outcome", "le"}},
	"playerdata_write_duration_seconds":       {"histogram", []string{"playerdata_driver", "playerdata_write_kind", "playerdata_write_outcome", "le"}},
	"playerdata_profiles":                     {"gauge", []string{"playerdata_driver", "playerdata_profile_state"}},
	"playerdata_lock_losses_total":            {"counter", []string{"playerdata_driver", "playerdata_loss_reason"}},
	"playerdata_takeovers_total":              {"counter", []string{"playerdata_driver", "playerdata_takeover_how"}},
	"playerdata_messages_sent_total":          {"counter", []string{"playerdata_driver", "playerdata_message_outcome"}},
	"playerdata_messages_applied_total":       {"counter", []string{"playerdata_driver"}},
	"playerdata_handoff_sent_total":           {"counter", []string{"playerdata_handoff_message", "error_type"}},
	"playerdata_handoff_received_total":       {"counter", []string{"playerdata_handoff_message"}},
	"playerdata_fences_total":                 {"counter", nil},
	"playerdata_fence_sessions_total":         {"counter", nil},
	"playerdata_bus_dropped_total":            {"counter", []string{"playerdata_drop_reason"}},
	"playerdata_bus_connection_events_total":  {"counter", []string{"playerdata_bus_event"}},
	"playerdata_messages_dead_lettered_total": {"counter", []string{"playerdata_driver"}},
	"playerdata_history_bytes":                {"histogram", []string{"playerdata_driver", "le"}},
	"playerdata_history_trimmed_total":        {"counter", []string{"playerdata_driver", "playerdata_history_trim"}},
	"playerdata_redis_memory_used_bytes":      {"gauge", nil},
	"playerdata_redis_memory_limit_bytes":     {"gauge", nil},
	"playerdata_redis_eviction_ratio":         {"gauge", []string{"playerdata_redis_maxmemory_policy"}},
}

// TestPrometheusNames scrapes the OTel Prometheus exporter and checks every
// metric's name, type and labels as Prometheus sees them.
func TestPrometheusNames(t *testing.T) {
	tel, scrape := promTelemetry(t)
	ctx := context.Background()
	exercise(ctx, tel)
	tel.StartSend(ctx, telemetry.Message{Kind: telemetry.MsgRequest, Peer: "b"}).End(errBoom) // error.type
	text := scrape()
	fams := parseScrape(text)
	for name, want := range promMetrics {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s not scraped", name)
			continue
		}
		if f.typ != want.typ {
			t.Errorf("%s: type %s, want %s", name, f.typ, want.typ)
		}
		var got []string
		for l := range f.labels {
			if !strings.HasPrefix(l, "otel_scope_") {
				got = append(got, l)
			}
		}
		w := slices.Clone(want.labels)
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s: labels %v, want %v", name, got, w)
		}
		if !f.labels["otel_scope_name"] {
			t.Errorf("%s: no otel_scope_name label", name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "playerdata_") {
			if _, ok := promMetrics[name]; !ok {
				t.Errorf("unexpected family %s", name)
			}
		}
	}
	if strings.Contains(text, "SECRET") {
		t.Error("the scrape carries a player key")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}
