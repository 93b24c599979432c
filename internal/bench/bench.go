package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"time"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

// ErrInvalidConfig is wrapped by the error Run returns for an Env or Config
// it cannot run with.
var ErrInvalidConfig = errors.New("invalid bench configuration")

// Env says where a run measures.
type Env struct {
	// RedisOptions returns the options of one new Redis client; the run
	// makes several (one per Node and per baseline, and its own for
	// statistics and clean-up) and sets PoolSize on some.
	// default: none (required)
	RedisOptions func() *redis.Options
	// NATSURL is the NATS server of the Nodes (handoff requests, message
	// notifications) and of the NATS floor.
	// default: none (required)
	NATSURL string
	// Namespace prefixes every Redis key and NATS subject of the run: each
	// measurement works under "<Namespace>:<name>" and deletes its keys when
	// it ends. It must be a valid NATS subject token.
	// default: none (required)
	Namespace string
	// EmbeddedRedis and EmbeddedNATS say the servers run inside this
	// process: the figures are not representative, and Result says so.
	// default: false
	EmbeddedRedis, EmbeddedNATS bool
	// Progress receives one line as each measurement starts.
	// default: nil (nothing is written)
	Progress io.Writer
	// Pinger returns the command of the big-profile history's other
	// client, a process that PINGs every period and writes RunPinger's
	// lines (started with ctx: it ends with it); nil, or a nil command: a
	// goroutine of the bench's own.
	// default: nil
	Pinger func(ctx context.Context, period time.Duration) *exec.Cmd
}

// Config says how much a run measures. The zero value is a full run.
type Config struct {
	// Quick marks a shortened run (QuickConfig); it is reported with the
	// results.
	// default: false
	Quick bool
	// Players are the concurrencies of the session cycle.
	// default: 1, 8 and 64
	Players []int
	// Rounds is how many measured rounds each system runs at each
	// concurrency (medians are reported).
	// default: 5
	Rounds int
	// RoundTime is how long one round runs its cycles.
	// default: 2 s
	RoundTime time.Duration
	// Warmup is the length of the unreported round each system runs at each
	// concurrency before the first measured one.
	// default: 500 ms
	Warmup time.Duration
	// CycleDataBytes is the encoded size of a profile in the session cycle.
	// default: 512
	CycleDataBytes int
	// PoolSize is the go-redis pool of every cycle client.
	// default: 128
	PoolSize int
	// ScriptCalls is how many calls each per-script phase makes.
	// default: 2000
	ScriptCalls int
	// Handoffs is how many stale-connection handoffs are timed (after 50
	// unreported ones).
	// default: 5000
	Handoffs int
	// CrashTrials is how many crashes are taken over; each crashed server
	// holds CrashProfiles profiles, which the other server joins at once.
	// default: 10 trials of 5 profiles
	CrashTrials, CrashProfiles int
	// CrashBeat and CrashTTL are the presence beat and TTL of the crash
	// measurement (the defaults are 3 s and 10 s; shortened to keep the run
	// short, the takeover scales with them).
	// default: 100 ms and 400 ms
	CrashBeat, CrashTTL time.Duration
	// PresenceServers beat one presence hash for PresenceWindow, each every
	// PresenceBeat (TTL 10/3 of it, the default ratio).
	// default: 200 servers, beat 250 ms, 10 s
	PresenceServers int
	PresenceBeat    time.Duration
	PresenceWindow  time.Duration
	// MemoryRecords records of MemoryDataBytes are each saved MemorySaves
	// times for the Redis memory figure.
	// default: 200 records of 1024 bytes, 5 saves
	MemoryRecords, MemorySaves, MemoryDataBytes int
	// HeapProfiles profiles are held at once for the Go heap figure.
	// default: 2000
	HeapProfiles int
	// Messages is how many live messages are timed (after 20 unreported
	// ones).
	// default: 2000
	Messages int
	// BigHistory runs only the big-profile history (BigHistory): a profile
	// near the default MaxDataBytes kept in up to 1,000 versions, which
	// takes minutes.
	// default: false (the other measurements)
	BigHistory bool
	// Only runs just the measurement of this name ("memory", "handoff",
	// ...: the names Run prints); unknown names are refused.
	// default: "" (all of them)
	Only string
}

// QuickConfig is a run that ends within a minute on a small machine: fewer
// and shorter rounds, the least samples the figures stand on.
func QuickConfig() Config {
	return Config{
		Quick: true, Rounds: 2, RoundTime: 300 * time.Millisecond, Warmup: 100 * time.Millisecond,
		ScriptCalls: 500, Handoffs: 1000, CrashTrials: 3, CrashProfiles: 5,
		PresenceBeat: 100 * time.Millisecond, PresenceWindow: 2 * time.Second,
		MemoryRecords: 50, HeapProfiles: 500, Messages: 1000,
	}
}

// withDefaults returns c with its zero fields set to their defaults, or an
// error wrapping ErrInvalidConfig.
func (c Config) withDefaults() (Config, error) {
	for _, n := range []int{c.Rounds, c.CycleDataBytes, c.PoolSize, c.ScriptCalls, c.Handoffs, c.CrashTrials,
		c.CrashProfiles, c.PresenceServers, c.MemoryRecords, c.MemorySaves, c.MemoryDataBytes, c.HeapProfiles, c.Messages} {
		if n < 0 {
			return c, fmt.Errorf("%w: a count is negative (%d)", ErrInvalidConfig, n)
		}
	}
	for _, d := range []time.Duration{c.RoundTime, c.Warmup, c.CrashBeat, c.CrashTTL, c.PresenceBeat, c.PresenceWindow} {
		if d < 0 {
			return c, fmt.Errorf("%w: a duration is negative (%s)", ErrInvalidConfig, d)
		}
	}
	for _, p := range c.Players {
		if p <= 0 {
			return c, fmt.Errorf("%w: Players holds %d", ErrInvalidConfig, p)
		}
	}
	if len(c.Players) == 0 {
		c.Players = []int{1, 8, 64}
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&c.Rounds, 5)
	setDur(&c.RoundTime, 2*time.Second)
	setDur(&c.Warmup, 500*time.Millisecond)
	setInt(&c.CycleDataBytes, 512)
	setInt(&c.PoolSize, 128)
	setInt(&c.ScriptCalls, 2000)
	setInt(&c.Handoffs, 5000)
	setInt(&c.CrashTrials, 10)
	setInt(&c.CrashProfiles, 5)
	setDur(&c.CrashBeat, 100*time.Millisecond)
	setDur(&c.CrashTTL, 400*time.Millisecond)
	setInt(&c.PresenceServers, 200)
	setDur(&c.PresenceBeat, 250*time.Millisecond)
	setDur(&c.PresenceWindow, 10*time.Second)
	setInt(&c.MemoryRecords, 200)
	setInt(&c.MemorySaves, 5)
	setInt(&c.MemoryDataBytes, 1024)
	setInt(&c.HeapProfiles, 2000)
	setInt(&c.Messages, 2000)
	if c.CrashTTL <= 2*c.CrashBeat {
		return c, fmt.Errorf("%w: CrashTTL %s must exceed two CrashBeats (%s)", ErrInvalidConfig, c.CrashTTL, c.CrashBeat)
	}
	if c.CycleDataBytes < minDataBytes || c.MemoryDataBytes < minDataBytes {
		return c, fmt.Errorf("%w: data sizes must be at least %d bytes", ErrInvalidConfig, minDataBytes)
	}
	return c, nil
}

// check reports what Run cannot work with.
func (e Env) check() error {
	switch {
	case e.RedisOptions == nil:
		return fmt.Errorf("%w: Env.RedisOptions is required", ErrInvalidConfig)
	case e.NATSURL == "":
		return fmt.Errorf("%w: Env.NATSURL is required", ErrInvalidConfig)
	}
	if err := jobid.Check(e.Namespace); err != nil {
		return fmt.Errorf("%w: Env.Namespace: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Result is what a run measured. Its JSON form is the command's --json
// output; fields tagged "-" are kept for the charts.
type Result struct {
	Machine Machine `json:"machine"`
	// Quick is true for a shortened run.
	Quick bool `json:"quick"`
	// Settings are the run's settings, in words.
	Settings Settings `json:"settings"`
	// Cycle holds the session cycle per concurrency, keyed by the number of
	// players ("1", "8", "64").
	Cycle map[string]CycleFigures `json:"cycle"`
	// CycleCommands says what one cycle costs inside Redis, per system.
	CycleCommands map[string]map[string]CommandCost `json:"cycle_commands"`
	Scripts       Scripts                           `json:"scripts_us"`
	Handoff       Handoff                           `json:"handoff"`
	Move          Move                              `json:"move"`
	Drain         Drain                             `json:"drain"`
	Crash         Crash                             `json:"crash_takeover"`
	Presence      PresenceCost                      `json:"presence"`
	Memory        Memory                            `json:"memory"`
	Messages      Messages                          `json:"messages"`
	Flood         Flood                             `json:"flood"`
	// Ratios are the run's comparisons, each figure divided by its baseline
	// or floor measured in the same run, with issue 35's targets
	// (ComputeRatios): what stays comparable from run to run.
	Ratios []Ratio `json:"ratios,omitempty"`
	// BigHistory is the big-profile history, measured alone (Config.BigHistory).
	BigHistory *BigHistory `json:"big_history,omitempty"`
	// Notes say what a figure does not show (a server without INFO cpu,
	// embedded servers).
	Notes []string `json:"notes,omitempty"`
	// Charts is the data of the report's distribution charts (WriteReport
	// fills it), so that WriteCharts can draw them from the JSON alone.
	Charts *ChartData `json:"charts,omitempty"`

	// handoffSamples and the floors' samples are the raw latencies (ms),
	// for the report's distribution chart.
	handoffSamples, evalshaSamples, natsSamples []float64
}

// Settings are the knobs of a run that shape its figures.
type Settings struct {
	Rounds          int     `json:"rounds"`
	RoundMS         float64 `json:"round_ms"`
	WarmupMS        float64 `json:"warmup_ms"`
	CycleDataBytes  int     `json:"cycle_data_bytes"`
	PoolSize        int     `json:"pool_size"`
	PresenceBeatMS  float64 `json:"presence_beat_ms"`
	PresenceWindowS float64 `json:"presence_window_s"`
}

// Players lists the concurrencies the result holds, in ascending order.
func (r *Result) Players() []int {
	var ps []int
	for _, c := range r.Cycle {
		ps = append(ps, c.Players)
	}
	slices.Sort(ps)
	return ps
}

// runner is one run: its environment, settings, own Redis client and what
// the server can tell.
type runner struct {
	env   Env
	cfg   Config
	admin *redis.Client // statistics, key clean-up
	stats bool          // INFO cpu and commandstats answer
	mem   bool          // MEMORY USAGE answers
	log   *slog.Logger  // the Nodes' logger: discards
	res   *Result
}

// Run measures everything in order (cycle, scripts, handoff, crash,
// presence, memory, messages) and returns the figures. ctx bounds the whole
// run; a cancelled run returns ctx.Err() wrapped. Keys are deleted as each
// measurement ends, and at the end every key under Env.Namespace.
func Run(ctx context.Context, env Env, cfg Config) (*Result, error) {
	if err := env.check(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{env: env, cfg: cfg, log: slog.New(slog.DiscardHandler)}
	r.admin = redis.NewClient(env.RedisOptions())
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, env.Namespace)
		_ = r.admin.Close()
	}()
	if err := r.admin.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("reach Redis: %w", err)
	}
	r.res = &Result{Quick: cfg.Quick, Settings: Settings{
		Rounds: cfg.Rounds, RoundMS: ms(cfg.RoundTime), WarmupMS: ms(cfg.Warmup), CycleDataBytes: cfg.CycleDataBytes,
		PoolSize: cfg.PoolSize, PresenceBeatMS: ms(cfg.PresenceBeat), PresenceWindowS: cfg.PresenceWindow.Seconds(),
	}}
	if env.EmbeddedRedis || env.EmbeddedNATS {
		r.note(Warning)
	}
	r.probe(ctx)
	r.res.Machine = r.machine(ctx)
	if load, ok := busy(r.res.Machine.LoadBefore, r.res.Machine.Cores); ok {
		r.note(fmt.Sprintf("The load average was %.2f on %d cores at the start: other processes compete with the "+
			"servers and the bench, and the figures are noisy. Measure on a quiet machine.", load, r.res.Machine.Cores))
	}
	start := time.Now()
	steps, err := r.steps(cfg)
	if err != nil {
		return nil, err
	}
	for i, s := range steps {
		r.progress("[%d/%d] %s", i+1, len(steps), s.name)
		if err := s.run(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", s.name, ctx.Err())
			}
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	r.res.Machine.DurationS = time.Since(start).Seconds()
	r.res.Machine.LoadAfter = loadAverage()
	if !cfg.BigHistory {
		r.res.Ratios = ComputeRatios(r.res)
	}
	return r.res, nil
}

// step is one measurement of a run.
type step struct {
	name string
	run  func(context.Context) error
}

// steps are the measurements cfg asks for, in order: all of them, the one
// named by Only, or the big-profile history alone.
func (r *runner) steps(cfg Config) ([]step, error) {
	if cfg.BigHistory {
		return []step{{"big-profile history", r.runBigHistory}}, nil
	}
	steps := []step{
		{"session cycle", r.runCycle},
		{"scripts", r.runScripts},
		{"handoff", r.runHandoff},
		{"move", r.runMove},
		{"drain", r.runDrain},
		{"crash takeover", r.runCrash},
		{"presence", r.runPresence},
		{"memory", r.runMemory},
		{"messages", r.runMessages},
		{"flood", r.runFlood},
	}
	if cfg.Only == "" {
		return steps, nil
	}
	i := slices.IndexFunc(steps, func(s step) bool { return s.name == cfg.Only })
	if i < 0 {
		return nil, fmt.Errorf("%w: no measurement named %q", ErrInvalidConfig, cfg.Only)
	}
	return steps[i : i+1], nil
}

// cleanupTimeout bounds the deletion of a namespace's keys.
const cleanupTimeout = 10 * time.Second

// progress writes one line to Env.Progress.
func (r *runner) progress(format string, a ...any) {
	if r.env.Progress != nil {
		fmt.Fprintf(r.env.Progress, "bench: "+format+"\n", a...)
	}
}

// note adds a note to the result, once.
func (r *runner) note(s string) {
	for _, n := range r.res.Notes {
		if n == s {
			return
		}
	}
	r.res.Notes = append(r.res.Notes, s)
}

// phaseNode starts a measurement's Node under the namespace r.ns(name),
// with a Redis client of its own (and SaveTimeout, 0: the default); end
// closes them and deletes the namespace's keys.
func (r *runner) phaseNode(ctx context.Context, name string, saveTimeout time.Duration) (
	node *datadriver.Node, rdb *redis.Client, ns string, end func(), err error) {
	ns = r.ns(name)
	rdb = r.client(0)
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if node != nil {
			_ = node.Close(cctx)
		}
		_ = rdb.Close()
		_ = r.deleteNamespace(cctx, ns)
	}
	node, err = datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "bench-" + randomID(), Redis: rdb, Namespace: ns,
		Logger: r.log, SaveTimeout: saveTimeout})
	if err != nil {
		cleanup()
		return nil, nil, "", nil, err
	}
	return node, rdb, ns, cleanup, nil
}

// ns is the namespace of one measurement (or round).
func (r *runner) ns(name string) string { return r.env.Namespace + ":" + name }

// client returns a new Redis client of the Env, with pool poolSize (0: the
// Env's).
func (r *runner) client(poolSize int) *redis.Client {
	opt := r.env.RedisOptions()
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	return redis.NewClient(opt)
}

// randomID returns 8 random hex digits (job ids of one run).
func randomID() string {
	var b [4]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
