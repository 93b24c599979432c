package sampling_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/sampling"
)

// ExampleKeepWaits installs the sampler in an OTel SDK TracerProvider that
// keeps no ordinary trace at all (a production rate would be 0.01 or so)
// and hands it to two servers. Server A's join takes a free lock and is
// dropped; server B's join of the same player waits for A's lock until its
// LockWait runs out, and is kept whole although its join span was not
// sampled. A real application exports with sdktrace.WithBatcher(exporter);
// the example exports to memory so that it can print what was kept.
func ExampleKeepWaits() {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sampling.KeepWaits(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)))),
		sdktrace.WithSyncer(spans),
	)
	defer func() { _ = tp.Shutdown(ctx) }()

	mr, _ := miniredis.Run() // any Redis: a real one in production
	defer mr.Close()
	type Player struct{ Coins int }
	server := func(job string) (*datadriver.Node, *datadriver.Driver[Player]) {
		node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
			JobID: job, Redis: redis.NewClient(&redis.Options{Addr: mr.Addr()}), Namespace: "mygame",
			TracerProvider: tp, // or otel.SetTracerProvider(tp) and leave it nil
			Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			panic(err)
		}
		players, err := datadriver.NewDriver(node, datadriver.Config[Player]{Name: "PlayerData", LockWait: 200 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		return node, players
	}
	nodeA, a := server("server-a")
	defer nodeA.Close(ctx)
	nodeB, b := server("server-b")
	defer nodeB.Close(ctx)

	if _, err := a.Join(ctx, "user:42"); err != nil {
		panic(err)
	}
	fmt.Println("spans kept of a join that did not wait:", len(spans.GetSpans()))

	_, err := b.Join(ctx, "user:42")
	fmt.Println("server-b's join timed out:", errors.Is(err, datadriver.ErrWaitTimeout))
	for _, s := range spans.GetSpans() {
		if s.Parent.IsValid() {
			continue // its children: acquire attempts, presence reads
		}
		fmt.Printf("kept: %s (%d link to the unsampled join span)\n", s.Name, len(s.Links))
		for _, kv := range s.Attributes {
			switch kv.Key {
			case sampling.WaitKey, "playerdata.join.path", "playerdata.join.outcome":
				fmt.Printf("  %s=%s\n", kv.Key, kv.Value.String())
			}
		}
	}
	// Output:
	// spans kept of a join that did not wait: 0
	// server-b's join timed out: true
	// kept: join PlayerData (1 link to the unsampled join span)
	//   playerdata.wait=true
	//   playerdata.join.path=handoff
	//   playerdata.join.outcome=refused
}
