package main

// playerdata bench: what the library costs per player and how fast a
// profile changes hands, beside baselines measured in the same run. The
// measuring is package internal/bench; this file holds the command: its
// flags, the servers it runs on, the output.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ckernel/playerdata/internal/bench"
	"github.com/ckernel/playerdata/messaging"
)

const benchUsage = `Usage: playerdata bench [flags]

Measures the library beside baselines, every figure in the same run as its
baselines, rounds interleaved, after a warm-up:

  session cycle   load under the lock → save → save-and-release, at 1, 8 and
                  64 players: ours, raw go-redis (HGETALL, HSET, HSET, no
                  lock) and redsync (lock, read, write, write, unlock);
                  cycles/s, ratios, Redis CPU per cycle, script times
  handoff         stale-connection handoffs between two servers: p50, p90,
                  p99, max, beside an EVALSHA and a NATS request round trip
  crash takeover  a holder stops beating (beat 100 ms, TTL 400 ms); another
                  server joins its profiles: mean and max against TTL + beat
  presence        200 servers beating: Redis commands and CPU per beat
  memory          Redis bytes per record (1 KiB of data, default history),
                  Go heap per resident profile
  messages        Driver.Send → OnMessage on the holder: p50, p99

Without --redis / --nats it starts an embedded Redis (miniredis) and NATS in
the process, and says loudly that such figures are not representative: give
a real Redis and NATS of your own (not one under other load). It works under
a fresh namespace "<prefix>-<random>" and deletes its keys as it goes; it
never resets the server's statistics or changes its configuration.

Flags:
  --redis URL        Redis to use (default $REDIS_URL; embedded when neither)
  --nats URL         NATS to use (default $NATS_URL; embedded when neither)
  --namespace PREFIX prefix of the run's fresh namespace (default "bench")
  --quick            a shorter run: ends within a minute
  --json             print one JSON object instead of the text
  --report DIR       also write charts (SVG), result.json and index.html into DIR

Exit status: 0 measured, 1 a measurement failed or a server cannot be
reached, 2 usage.
`

// benchFlags are bench's flags.
type benchFlags struct {
	conn   connFlags
	quick  bool
	json   bool
	report string
}

// runBench is "playerdata bench".
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("bench", benchUsage)
	var f benchFlags
	f.conn.addRedis(cmd.fs)
	f.conn.addNATS(cmd.fs)
	cmd.fs.BoolVar(&f.quick, "quick", false, "")
	cmd.fs.BoolVar(&f.json, "json", false, "")
	cmd.fs.StringVar(&f.report, "report", "", "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmd.mistake("unexpected argument %q", pos[0])
	}
	prefix := f.conn.namespace
	if prefix == "" {
		prefix = "bench"
	}
	if err := messaging.ValidJobID(prefix); err != nil {
		return cmd.mistake("--namespace %q: %v", prefix, err)
	}
	f.conn.fromEnv()

	env, err := startDemoEnv(ctx, f.conn, prefix)
	if err != nil {
		return err
	}
	defer env.close()
	embeddedNATS := f.conn.natsURL == ""
	if env.embedded || embeddedNATS {
		fmt.Fprintf(stderr, "playerdata bench: %s\n  Redis %s\n  NATS  %s\n", bench.Warning, env.redisDesc, env.natsDesc)
	}

	cfg := bench.Config{}
	if f.quick {
		cfg = bench.QuickConfig()
	}
	res, err := bench.Run(ctx, bench.Env{
		RedisOptions: env.redisOptions, NATSURL: env.natsURL, Namespace: env.namespace,
		EmbeddedRedis: env.embedded, EmbeddedNATS: embeddedNATS, Progress: stderr,
	}, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if f.report != "" {
		if err := bench.WriteReport(f.report, res); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		fmt.Fprintf(stderr, "playerdata bench: report written to %s\n", f.report)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteText(stdout)
}
