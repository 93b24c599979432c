package datadriver_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/sampling"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkTelemetryOverhead measures what the OpenTelemetry instrumentation
// costs a session cycle (Join, Update and Save, Update and Release: three
// round trips on one real Redis), the promise being under 3 % with no SDK
// installed. A Node cannot run without its instrumentation, so the
// variants are three Nodes on the same Redis:
//
//   - noop: NodeConfig.MeterProvider and TracerProvider set to the OTel API's
//     no-op providers, the cheapest the instrumentation gets;
//   - global: both nil, the default: the global providers, which delegate
//     to an SDK once the application installs one (this benchmark installs
//     none);
//   - sdk: an SDK MeterProvider with a manual reader and an SDK
//     TracerProvider sampling every span (KeepWaits over AlwaysSample) into
//     an in-memory exporter, for comparison.
//
// Each variant runs alone (ns/op, allocs/op), then "interleaved" runs one
// cycle of each per iteration, in rotating order, so that machine noise
// falls on all three alike; it reports each one's median (µs) and the
// medians of the rounds' ratios global/noop and sdk/noop (medians, so that
// a stall of the machine or of Redis in one round does not decide them).
// The noop variant still calls the instrumentation, so "interleaved" also
// times the telemetry calls of one cycle by themselves (StartJoin, an
// acquire span, JoinDone, two writes) on the global providers and reports
// them per cycle (calls-ns) and as a share of the noop cycle (calls-%): the
// overhead against no instrumentation at all.
//
//	go test -run '^$' -bench TelemetryOverhead -count 10 ./datadriver/ | tee new.txt
//	benchstat new.txt
//
// The Nodes log at Info to io.Discard, as a production server would (the
// other benchmarks' debug lines would dilute the figure).
func BenchmarkTelemetryOverhead(b *testing.B) {
	if _, s := otel.GetTracerProvider().Tracer("probe").Start(context.Background(), "probe"); s.SpanContext().IsValid() {
		b.Fatal("a global TracerProvider is installed: the global variant would not be the no-SDK one")
	}
	r := testsupport.StartRedis(b)
	ctx := context.Background()
	quiet := func(c *datadriver.NodeConfig) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) }

	spans := tracetest.NewInMemoryExporter()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampling.KeepWaits(nil)), sdktrace.WithSyncer(spans))
	b.Cleanup(func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) })

	type variant struct {
		name string
		otel func(*datadriver.NodeConfig)
		d    *datadriver.Driver[player]
		key  string
	}
	vs := []*variant{
		{name: "noop", otel: func(c *datadriver.NodeConfig) {
			c.MeterProvider, c.TracerProvider = metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()
		}},
		{name: "global", otel: func(*datadriver.NodeConfig) {}},
		{name: "sdk", otel: func(c *datadriver.NodeConfig) { c.MeterProvider, c.TracerProvider = mp, tp }},
	}
	for _, v := range vs {
		s := newServer(b, r, "bench-tel-"+v.name, quiet, v.otel)
		v.d = players(b, s, func(c *datadriver.Config[player]) { c.Defaults = benchPlayer() })
		v.key = "cycle-" + v.name
	}
	cycle := func(b *testing.B, v *variant) {
		if err := sessionCycle(ctx, v.d, v.key); err != nil {
			b.Fatal(err)
		}
		if v.name == "sdk" {
			spans.Reset()
		}
	}

	for _, v := range vs {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cycle(b, v)
			}
		})
	}

	tel := telemetry.New(telemetry.Config{JobID: "bench-tel-calls"})
	calls := tel.Driver("PlayerData")
	const callReps = 100 // per iteration, so that time.Now's cost is amortized
	b.Run("interleaved", func(b *testing.B) {
		rounds := make([][]time.Duration, len(vs)) // [variant][round]
		var callsT time.Duration
		for i := 0; b.Loop(); i++ {
			for j := range vs {
				k := (i + j) % len(vs)
				t0 := time.Now()
				cycle(b, vs[k])
				rounds[k] = append(rounds[k], time.Since(t0))
			}
			t0 := time.Now()
			for range callReps {
				cycleCalls(ctx, calls)
			}
			callsT += time.Since(t0)
		}
		n := len(rounds[0])
		ratio := func(k int) float64 {
			r := make([]float64, n)
			for i := range r {
				r[i] = float64(rounds[k][i]) / float64(rounds[0][i])
			}
			return median(r)
		}
		for k, v := range vs {
			b.ReportMetric(median(durations(rounds[k]))/1e3, v.name+"-µs")
		}
		b.ReportMetric(ratio(1), "global/noop")
		b.ReportMetric(ratio(2), "sdk/noop")
		callNs := float64(callsT) / float64(n*callReps)
		b.ReportMetric(callNs, "calls-ns")
		b.ReportMetric(100*callNs/median(durations(rounds[0])), "calls-%")
	})
}

// sessionCycle is one player session on d: Join key, Update and Save, then
// Update and Release (the leave save). Three round trips: the acquire, the
// save and the save that releases.
func sessionCycle(ctx context.Context, d *datadriver.Driver[player], key string) error {
	p, err := d.Join(ctx, key)
	if err != nil {
		return err
	}
	_ = p.Update(func(d *player) { d.Coins++ })
	if err := p.Save(ctx); err != nil {
		return err
	}
	_ = p.Update(func(d *player) { d.Coins++ })
	return p.Release(ctx)
}

// cycleCalls makes the telemetry calls of one sessionCycle whose Join finds
// the lock free (load.go, acquire.go, save.go): the join and its acquire
// attempt, then the save and the release writes.
func cycleCalls(ctx context.Context, d *telemetry.Driver) {
	jctx := d.StartJoin(ctx, "cycle")
	_, a := d.StartAcquire(jctx)
	a.End(telemetry.AcquireTaken, "", nil)
	d.JoinDone(jctx, time.Millisecond, telemetry.JoinFree, telemetry.JoinLoaded, nil)
	for _, kind := range [...]telemetry.WriteKind{telemetry.WriteSave, telemetry.WriteRelease} {
		_, w := d.StartWrite(ctx, kind, "cycle")
		w.End(telemetry.WriteOK, time.Millisecond, nil)
	}
}

// durations are ds in nanoseconds.
func durations(ds []time.Duration) []float64 {
	f := make([]float64, len(ds))
	for i, d := range ds {
		f[i] = float64(d)
	}
	return f
}

// median is the median of xs (sorted in place); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 0 {
		return (xs[m-1] + xs[m]) / 2
	}
	return xs[m]
}
