package telemetry_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// globalChildEnv marks the child process of TestGlobalSDKInstalledLater.
const globalChildEnv = "PLAYERDATA_TELEMETRY_GLOBAL_CHILD"

// TestGlobalSDKInstalledLater: a Telemetry made from the global providers
// before the application installs its SDK starts recording metrics and
// spans once it does. It runs in a child process, since the global
// providers can be installed once per process.
func TestGlobalSDKInstalledLater(t *testing.T) {
	if os.Getenv(globalChildEnv) == "1" {
		globalChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalSDKInstalledLater$", "-test.v")
	cmd.Env = append(os.Environ(), globalChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// globalChild is the test, in the child process.
func globalChild(t *testing.T) {
	tel := telemetry.New(telemetry.Config{JobID: "server-a"})
	d := tel.Driver("PlayerData")
	ctx := context.Background()
	if got := d.StartJoin(ctx, secretKey); got != ctx {
		t.Fatal("spans made before an SDK was installed")
	}

	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))

	jctx := d.StartJoin(ctx, secretKey)
	d.JoinDone(jctx, time.Second, telemetry.JoinFree, telemetry.JoinLoaded, nil)
	if spans := exp.GetSpans(); len(spans) != 1 || spans[0].Name != "join PlayerData" {
		t.Errorf("spans after installing the SDK: %v", names(spans))
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Metrics[0].Name != "playerdata.join.duration" {
		t.Errorf("metrics after installing the SDK: %+v", rm.ScopeMetrics)
	}
}
