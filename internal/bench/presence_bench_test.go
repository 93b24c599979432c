package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkPresenceCost runs playerdata-bench's presence measurement alone
// (the full run's 200 servers, beat 250 ms, 10 s window) on a redis-server
// of its own, so that no other client's scripts are counted. Run it with
//
//	go test -run '^$' -bench PresenceCost -benchtime 1x ./internal/bench/
//
// PRESENCE_BENCH_QUICK=1 takes --quick's beat and window (100 ms, 2 s).
// PRESENCE_BENCH_REDIS=host:port runs it on that Redis instead (one that no
// other client uses: e.g. a redis-server started at a higher CPU priority
// than the bench, as on a host of its own, when the machine is busy).
//
// Each figure is logged and reported as a metric; nothing is asserted.
func BenchmarkPresenceCost(b *testing.B) {
	addr, ns := benchRedis(b, "PRESENCE_BENCH_REDIS", "presence-bench")
	opt := &redis.Options{Addr: addr}
	env := Env{RedisOptions: func() *redis.Options { o := *opt; return &o }, Namespace: ns, Progress: os.Stderr}
	var cfg Config
	if os.Getenv("PRESENCE_BENCH_QUICK") == "1" { // --quick's beat and window
		q := QuickConfig()
		cfg.PresenceBeat, cfg.PresenceWindow = q.PresenceBeat, q.PresenceWindow
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range b.N {
		run := &runner{env: env, cfg: cfg, log: slog.New(slog.DiscardHandler), res: &Result{}}
		run.admin = redis.NewClient(env.RedisOptions())
		run.probe(ctx)
		if err := run.admin.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		if err := run.runPresence(ctx); err != nil {
			b.Fatal(err)
		}
		if cs, err := run.admin.Info(ctx, "commandstats").Result(); err == nil {
			// To stderr: a benchmark's log is cut after a few lines.
			fmt.Fprintf(os.Stderr, "the whole step (claims, start-up and clean-up included):\n%s\n", strings.TrimSpace(cs))
		}
		_ = run.admin.Close()
		p := run.res.Presence
		b.Logf("%+v", p)
		b.ReportMetric(p.ScriptUSPerBeat, "script-µs/beat")
		b.ReportMetric(p.RedisCPUUSPerBeat, "cpu-µs/beat")
		b.ReportMetric(p.CmdsPerBeat, "cmds/beat")
	}
}
