package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// config is the parsed command line. A zero duration means the library's
// default for library timings.
type config struct {
	redisAddr    string
	redisTimeout time.Duration // 0: go-redis default options
	natsURL      string        // "": no bus
	job, ns      string
	driver       string
	prefix       string
	first, count int
	concurrency  int
	update, save time.Duration
	rejoin       time.Duration // 0: a session that ended or a join that failed is not retried
	releaseDelay time.Duration
	logUpdates   bool
	messages     bool          // OnMessage applies faulttest.Gift messages
	waitStart    bool          // join nothing until the "start" command
	applyDelay   time.Duration // the time OnMessage takes
	logLevel     slog.Level

	beat, ttl, fenceMargin     time.Duration
	lockWait, parkMin, parkMax time.Duration
	requestRepeat, saveTimeout time.Duration

	sentinels   string // comma-separated sentinel addresses: a failover client instead of -redis
	master      string // the sentinels' master name
	minReplicas int    // NodeConfig.MinReplicas
	soloCalls   int    // NodeConfig.SoloCalls

	lostCommit bool // SIGUSR2 toggles the lost-commit fault (lostcommit.go)

	traffic trafficConfig
}

// trafficConfig is traffic mode's part of the command line (-traffic).
type trafficConfig struct {
	on      bool
	history string // the history file
	workers int
	seed    int64
	opEvery time.Duration // mean pause between one worker's operations
	hold    time.Duration // how long a hold keeps a session idle
	moveTo  string        // comma-separated JobIDs a worker may move its session to ("": none)
}

// keys lists the keys the server plays: prefix + first … prefix + first+count-1.
func (c config) keys() []string {
	keys := make([]string, c.count)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", c.prefix, c.first+i)
	}
	return keys
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gameserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.redisAddr, "redis", "", "Redis address host:port (required)")
	fs.DurationVar(&c.redisTimeout, "redis-timeout", 0,
		"short go-redis timeouts: dial, read and write timeout, one retry, context deadlines honoured (0: go-redis defaults)")
	fs.StringVar(&c.natsURL, "nats", "", "NATS URL for release requests (empty: no bus)")
	fs.StringVar(&c.job, "job", "", "JobID (required)")
	fs.StringVar(&c.ns, "ns", "", "namespace")
	fs.StringVar(&c.driver, "driver", "PlayerData", "driver name")
	fs.StringVar(&c.prefix, "prefix", "user:", "key prefix")
	fs.IntVar(&c.first, "first", 0, "first key number")
	fs.IntVar(&c.count, "count", 10, "number of keys")
	fs.IntVar(&c.concurrency, "concurrency", 64, "joins in flight at once")
	fs.DurationVar(&c.update, "update", 100*time.Millisecond, "period of each profile's Update")
	fs.DurationVar(&c.save, "save", time.Second, "period of each profile's Save")
	fs.DurationVar(&c.rejoin, "rejoin", 0, "join again this long after a session ended or a join failed (0: never)")
	fs.DurationVar(&c.releaseDelay, "release-delay", 0, "time the leave cleanup (OnRelease) takes")
	fs.BoolVar(&c.logUpdates, "log-updates", false, "print an event for every accepted Update")
	fs.BoolVar(&c.messages, "messages", false, "apply messages (faulttest.Gift) with OnMessage, printing an event for each")
	fs.BoolVar(&c.waitStart, "wait-start", false, "join no key until the stdin command \"start\" (a move's target)")
	fs.DurationVar(&c.applyDelay, "apply-delay", 0, "time OnMessage takes for each message (a slow game handler)")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "level of the library's log on stderr")
	fs.DurationVar(&c.beat, "beat", 0, "NodeConfig.Beat")
	fs.DurationVar(&c.ttl, "ttl", 0, "NodeConfig.PresenceTTL")
	fs.DurationVar(&c.fenceMargin, "fence-margin", 0, "NodeConfig.FenceMargin")
	fs.DurationVar(&c.lockWait, "lock-wait", 0, "Config.LockWait")
	fs.DurationVar(&c.parkMin, "park-min", 0, "NodeConfig.ParkMin")
	fs.DurationVar(&c.parkMax, "park-max", 0, "NodeConfig.ParkMax")
	fs.DurationVar(&c.requestRepeat, "request-repeat", 0, "NodeConfig.RequestRepeat")
	fs.DurationVar(&c.saveTimeout, "save-timeout", 0, "NodeConfig.SaveTimeout, and the bound of each Save call")
	fs.StringVar(&c.sentinels, "sentinels", "", "comma-separated Sentinel addresses: a failover client of -master instead of -redis")
	fs.StringVar(&c.master, "master", "", "the Sentinel master name (with -sentinels)")
	fs.IntVar(&c.minReplicas, "min-replicas", 0, "NodeConfig.MinReplicas")
	// 2, not the library's 8: the faults meet lock calls in pipelines as
	// often as alone, with a few players.
	fs.IntVar(&c.soloCalls, "solo-calls", 2, "NodeConfig.SoloCalls")
	fs.BoolVar(&c.lostCommit, "lost-commit-fault", false,
		"SIGUSR2 turns the lost-commit fault on and off: move commits dropped, every second flip's answer lost")
	fs.BoolVar(&c.traffic.on, "traffic", false, "traffic mode: workers Join, Update, Save, Release and hold random keys, recording every operation in -history")
	fs.StringVar(&c.traffic.history, "history", "", "traffic mode: the history file (appended, one line per call and return)")
	fs.IntVar(&c.traffic.workers, "workers", 3, "traffic mode: workers, each with at most one session")
	fs.Int64Var(&c.traffic.seed, "seed", 1, "traffic mode: seed of the workers' choices")
	fs.DurationVar(&c.traffic.opEvery, "op-every", 10*time.Millisecond, "traffic mode: mean pause between a worker's operations")
	fs.DurationVar(&c.traffic.hold, "hold", 150*time.Millisecond, "traffic mode: how long a hold keeps a session without operations")
	fs.StringVar(&c.traffic.moveTo, "move-to", "", "traffic mode: comma-separated JobIDs a worker may move its session to (Profile.MoveTo)")
	if err := fs.Parse(args); err != nil {
		return c, errUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected arguments %q\n", fs.Args())
	case (c.redisAddr == "") == (c.sentinels == "") || c.job == "":
		fmt.Fprintln(stderr, "-job and one of -redis or -sentinels are required")
	case c.sentinels != "" && c.master == "":
		fmt.Fprintln(stderr, "-sentinels needs -master")
	case c.traffic.on && (c.traffic.history == "" || c.traffic.workers < 1 || c.traffic.opEvery <= 0 || c.traffic.hold <= 0):
		fmt.Fprintln(stderr, "-traffic needs -history, and positive -workers, -op-every and -hold")
	case c.count < 0 || c.concurrency < 1:
		fmt.Fprintln(stderr, "-count must not be negative and -concurrency must be positive")
	case c.update <= 0 || c.save <= 0:
		fmt.Fprintln(stderr, "-update and -save must be positive")
	default:
		return c, nil
	}
	return c, errUsage
}
