// Command playerdata-bench measures what the library costs per player and
// how fast a profile changes hands, beside baselines measured in the same
// run (raw go-redis, redsync). It is the lab beside the operator's tool:
// playerdata bench runs it, and playerdata itself links none of it. The
// measuring is package internal/bench; this command holds the flags, the
// servers it runs on and the output.
//
// Everything happens in run, which tests call in-process; main only maps
// its error to an exit status with one line on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/bench"
	"github.com/ckernel/playerdata/internal/labenv"
)

const usage = `Usage: playerdata-bench [flags]   (also: playerdata bench [flags])

Measures the library beside baselines, every figure in the same run as its
baselines, rounds interleaved, after a warm-up:

  session cycle   load under the lock → save → save-and-release, at 1, 8 and
                  64 players: ours, raw go-redis (HGETALL, HSET, HSET, no
                  lock), redsync (lock, read, write, write, unlock) and
                  floor (3 calls of a minimal token-fenced script: the
                  least a fenced-script lock does); cycles/s, ratios, Redis
                  and Go CPU per cycle, script times
  handoff         stale-connection handoffs between two servers: p50, p90,
                  p99, max, beside an EVALSHA and a NATS request round trip
  crash takeover  a holder stops beating (beat 100 ms, TTL 400 ms); another
                  server joins its profiles: mean and max against TTL + beat
  presence        200 servers beating, each publishing a session count that
                  changes every 4th beat: Redis commands, script time and CPU
                  per beat against the target (20 µs of script) and the floor
                  beat (TIME and one HSET in a script) at the same pace
  memory          Redis bytes per record (1 KiB of data, default history),
                  Go heap per resident profile
  messages        Driver.Send → OnMessage on the holder: p50, p99

With --big-history it measures only the big-profile history: a profile near
the default MaxDataBytes (4 MiB), a version kept by every save, 5 % of the
values changed by each; save p50/p99 with 10, 100 and 1,000 kept versions,
another client's worst PING meanwhile, the slowest single Redis command
(SLOWLOG), and ReadVersion of the oldest version (latency, bytes allocated).
It takes minutes (--quick: 10 and 100 versions).

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
  --compare FILE     then print, for each ratio, FILE's (a result --json wrote,
                     e.g. docs/bench/reference.json) beside this run's, marking
                     those that moved away from their target by over 10 %
  --result FILE      with --compare: measure nothing, compare FILE's result
  --big-history      measure only the big-profile history (minutes)
  --only NAME        run only the measurement NAME ("memory", "handoff", ...)

Every comparison is also a ratio (a figure ÷ its baseline or floor in the
same run), named with issue 35's target and whether it is met: --json's
"ratios", the last table of the text. Ratios move far less with the
machine's load than the times they divide, so they compare run to run.

Exit status: 0 measured, 1 a measurement failed or a server cannot be
reached, 2 usage.
`

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError that points at the help.
func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...) + " (see playerdata-bench --help)"}
}

func main() {
	redis.SetLogger(quietLogger{}) // the command reports a failed dial itself, in one line
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if os.Getenv(bench.PingerEnv) == "1" { // the big-profile history's other client (pinger)
		err := runPinger(ctx, os.Stdout)
		stop()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var u *usageError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &u):
		fmt.Fprintln(os.Stderr, "playerdata-bench: "+err.Error())
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "playerdata-bench: "+strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
		os.Exit(1)
	}
}

// quietLogger drops go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// flags are the command's flags.
type flags struct {
	redisURL, natsURL, prefix string
	quick, json, bigHistory   bool
	report, only              string
	compare, result           string
}

// parse parses args; --help prints the usage to stdout (flag.ErrHelp).
func parse(args []string, stdout io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("playerdata-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.redisURL, "redis", "", "")
	fs.StringVar(&f.natsURL, "nats", "", "")
	fs.StringVar(&f.prefix, "namespace", "bench", "")
	fs.BoolVar(&f.quick, "quick", false, "")
	fs.BoolVar(&f.json, "json", false, "")
	fs.StringVar(&f.report, "report", "", "")
	fs.BoolVar(&f.bigHistory, "big-history", false, "")
	fs.StringVar(&f.compare, "compare", "", "")
	fs.StringVar(&f.result, "result", "", "")
	fs.StringVar(&f.only, "only", "", "")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return f, err
	case err != nil:
		return f, usagef("%v", err)
	case fs.NArg() > 0:
		return f, usagef("unexpected argument %q", fs.Arg(0))
	}
	if f.bigHistory && f.report != "" {
		return f, usagef("--report draws the other measurements: not with --big-history")
	}
	if f.bigHistory && f.compare != "" {
		return f, usagef("--compare compares the other measurements: not with --big-history")
	}
	if f.result != "" && f.compare == "" {
		return f, usagef("--result names the result to compare: give --compare too")
	}
	if err := jobid.Check(f.prefix); err != nil {
		return f, usagef("--namespace %q: %v", f.prefix, err)
	}
	if f.redisURL == "" {
		f.redisURL = os.Getenv("REDIS_URL")
	}
	if f.natsURL == "" {
		f.natsURL = os.Getenv("NATS_URL")
	}
	return f, nil
}

// run runs the bench with args, writing the result to stdout and progress
// and warnings to stderr. ctx cancels it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var ref *bench.Result
	if f.compare != "" {
		if ref, err = bench.ReadResult(f.compare); err != nil { // before a run of minutes
			return fmt.Errorf("--compare: %w", err)
		}
	}
	if f.result != "" {
		now, err := bench.ReadResult(f.result)
		if err != nil {
			return fmt.Errorf("--result: %w", err)
		}
		return bench.WriteComparison(stdout, ref, now)
	}
	res, err := measure(ctx, f, stderr)
	if err != nil {
		return err
	}
	if f.report != "" {
		if err := bench.WriteReport(f.report, res); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		fmt.Fprintf(stderr, "playerdata-bench: report written to %s\n", f.report)
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil || ref == nil {
		return err
	}
	out := stdout
	if f.json { // stdout holds one JSON object
		out = stderr
	} else {
		fmt.Fprintln(out)
	}
	return bench.WriteComparison(out, ref, res)
}

// measure starts the servers (or reaches the given ones) and runs the
// bench as f says.
func measure(ctx context.Context, f flags, stderr io.Writer) (*bench.Result, error) {
	env, err := labenv.Start(ctx, labenv.Config{RedisURL: f.redisURL, NATSURL: f.natsURL, Prefix: f.prefix, Tool: "playerdata-bench"})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	if env.Embedded || env.EmbeddedNATS {
		fmt.Fprintf(stderr, "playerdata-bench: %s\n  Redis %s\n  NATS  %s\n", bench.Warning, env.RedisDesc, env.NATSDesc)
	}
	cfg := bench.Config{}
	if f.quick {
		cfg = bench.QuickConfig()
	}
	cfg.BigHistory, cfg.Only = f.bigHistory, f.only
	benv := bench.Env{
		RedisOptions: env.RedisOptions, NATSURL: env.NATSURL, Namespace: env.Namespace,
		EmbeddedRedis: env.Embedded, EmbeddedNATS: env.EmbeddedNATS, Progress: stderr,
	}
	if f.redisURL != "" {
		benv.Pinger = pingerCommand(f.redisURL)
	}
	res, err := bench.Run(ctx, benv, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return res, nil
}

// pingerCommand runs this program as the big-profile history's other
// client, on the Redis at url: a process of its own, whose PINGs measure
// Redis and not this process's pauses. nil when this program's path is
// not known (the bench then PINGs from a goroutine).
func pingerCommand(url string) func(context.Context, time.Duration) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return func(ctx context.Context, period time.Duration) *exec.Cmd {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), bench.PingerEnv+"=1", bench.PingerRedisEnv+"="+url,
			bench.PingerPeriodEnv+"="+period.String())
		return cmd
	}
}

// runPinger is this process as the other client: bench.RunPinger on the
// Redis its environment names.
func runPinger(ctx context.Context, w io.Writer) error {
	opts, err := labenv.RedisOptions(os.Getenv(bench.PingerRedisEnv))
	if err != nil {
		return err
	}
	period, err := time.ParseDuration(os.Getenv(bench.PingerPeriodEnv))
	if err != nil {
		return err
	}
	return bench.RunPinger(ctx, opts, period, w)
}
