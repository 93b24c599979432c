package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkCycle runs playerdata-bench's session cycle (load under the
// lock → save → save-and-release, 512-byte data, history on by default)
// for each system at 8 players, one cycle per b.N, on a redis-server of
// its own: the shape to profile where a cycle's time goes.
//
//	go test -run '^$' -bench Cycle/ours -cpuprofile cpu.out -memprofile mem.out ./internal/bench/
//
// Each sub-benchmark reports, besides ns/op (b.RunParallel over 8
// players), the Redis time of each command per call as INFO commandstats
// counts it ("evalsha-µs/call") and per cycle. CYCLE_BENCH_REDIS=host:port
// runs it on that Redis instead. The players' context is
// context.Background(); CYCLE_BENCH_CANCEL=1 makes it one that can be
// cancelled, as playerdata-bench's and a server's are. CYCLE_BENCH_PLAYERS
// sets the player count (no fewer than GOMAXPROCS: the goroutines share the
// players), CYCLE_BENCH_SOLO ours' NodeConfig.SoloCalls. Nothing is asserted.
//
// Its systems are the bench's four (ours, raw, redsync, floor) and
// scripts: the library's own scripts with nothing of the library around
// them (scriptsCycle), which splits ours' distance from the floor into the
// library's part and its protocol's.
func BenchmarkCycle(b *testing.B) {
	addr, ns := benchRedis(b, "CYCLE_BENCH_REDIS", "cycle-bench")
	opt := &redis.Options{Addr: addr, PoolSize: 128}
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	blob := newBlob(512, rand.NewChaCha8([32]byte{1}))
	players := 8
	if n, err := strconv.Atoi(os.Getenv("CYCLE_BENCH_PLAYERS")); err == nil && n > 0 {
		players = n
	}
	solo, _ := strconv.Atoi(os.Getenv("CYCLE_BENCH_SOLO")) // NodeConfig.SoloCalls of ours; 0: its default
	systems := []struct {
		name  string
		cycle func(b *testing.B, ns string) func(ctx context.Context, w, i int) error
	}{
		{sysOurs, func(b *testing.B, ns string) func(ctx context.Context, w, i int) error {
			node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "bench-" + randomID(), Redis: rdb,
				Namespace: ns, Logger: slog.New(slog.DiscardHandler), SoloCalls: solo})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = node.Close(context.Background()) })
			drv, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName})
			if err != nil {
				b.Fatal(err)
			}
			return oursCycle(drv, blob)
		}},
		{sysRaw, func(_ *testing.B, ns string) func(ctx context.Context, w, i int) error {
			return rawCycle(rdb, ns, blob)
		}},
		{sysRedsync, func(_ *testing.B, ns string) func(ctx context.Context, w, i int) error {
			return redsyncCycle(rdb, redsync.New(rsgoredis.NewPool(rdb)), ns, players, blob)
		}},
		{sysFloor, func(_ *testing.B, ns string) func(ctx context.Context, w, i int) error {
			return floorCycle(rdb, ns, blob)
		}},
		{sysScripts, func(_ *testing.B, ns string) func(ctx context.Context, w, i int) error {
			return scriptsCycle(rdb, ns, blob)
		}},
	}
	for _, sys := range systems {
		b.Run(sys.name, func(b *testing.B) {
			cycle := sys.cycle(b, fmt.Sprintf("%s:%s-%s", ns, sys.name, randomID()))
			var next atomic.Int64
			stats := &runner{admin: rdb, stats: true}
			before, err := stats.snap(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(max(1, players/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			cctx := ctx
			if os.Getenv("CYCLE_BENCH_CANCEL") != "" {
				var cancel context.CancelFunc
				cctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			b.RunParallel(func(pb *testing.PB) {
				w := int(next.Add(1)-1) % players
				for i := 0; pb.Next(); i++ {
					if err := cycle(cctx, w, i); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			after, err := stats.snap(ctx)
			if err != nil {
				b.Fatal(err)
			}
			reportCommands(b, after.since(before))
		})
	}
}

// reportCommands reports each command's Redis time per call and calls
// per cycle (b.N), from INFO commandstats, and Redis CPU per cycle.
func reportCommands(b *testing.B, d serverDelta) {
	b.Helper()
	for name, c := range d.cmds {
		if name == "info" || c.Calls == 0 {
			continue
		}
		name = strings.ReplaceAll(name, "|", "-")
		b.ReportMetric(float64(c.Usec)/float64(c.Calls), name+"-µs/call")
		b.ReportMetric(float64(c.Calls)/float64(b.N), name+"-calls/cycle")
	}
	b.ReportMetric(d.cpuUS/float64(b.N), "redis-cpu-µs/cycle")
}

// benchRedis is the Redis a benchmark measures: the one the environment
// variable env names (host:port; ns is then the benchmark's namespace), or
// a redis-server of its own, so that no other client's commands are
// counted. Without a redis-server it skips b.
func benchRedis(b *testing.B, env, ns string) (addr, namespace string) {
	b.Helper()
	if addr := os.Getenv(env); addr != "" {
		return addr, ns
	}
	r := testsupport.StartOwnRedis(b)
	if r.Kind != testsupport.KindRedisServer {
		b.Skip("needs a redis-server of its own (INFO commandstats and cpu)")
	}
	return r.Addr, r.Namespace
}
