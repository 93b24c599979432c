package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

// BigHistory is what kept versions cost with a profile near the default
// MaxDataBytes: a gameProfile of about BigDataBytes (an inventory of some
// 250,000 items), every save keeping a version (HistoryEvery 1 ms) and
// changing ChangePct of the values. For each number of kept versions a
// record is filled to that many versions, then Saves more saves are timed
// (each keeps one and trims the oldest, so the count stays). Meanwhile
// another client PINGs the same Redis every PingEveryMS: its slowest answer
// is how long our calls held Redis from everybody else.
type BigHistory struct {
	DataBytes   int     `json:"data_bytes"`
	ChangePct   int     `json:"change_pct"`
	PingEveryMS float64 `json:"ping_every_ms"`
	// PingProcess: the other client is a process of its own (Env.Pinger);
	// else a goroutine of the bench's, whose figure includes this process's
	// own pauses.
	PingProcess bool `json:"ping_process"`
	// Levels are the figures per number of kept versions.
	Levels []BigLevel `json:"levels"`
	// WorstPingMS is the other client's slowest PING over the whole phase,
	// the filling of every record included.
	WorstPingMS float64 `json:"worst_ping_ms"`
	Pings       int     `json:"pings"`
	// SlowestCallMS is the longest single command SLOWLOG recorded during
	// the phase (0: none passed its threshold, SlowlogThresholdMS).
	SlowestCallMS      float64 `json:"slowest_call_ms"`
	SlowestCall        string  `json:"slowest_call,omitempty"`
	SlowlogThresholdMS float64 `json:"slowlog_threshold_ms"`
	// ReadOldest is Driver.ReadVersion of the oldest version kept by the
	// record of the most versions; ReadOldestAllocBytes the bytes it
	// allocates per read (runtime.MemStats TotalAlloc).
	ReadOldest           Latency `json:"read_oldest"`
	ReadOldestAllocBytes float64 `json:"read_oldest_alloc_bytes"`
	ReadWorstPingMS      float64 `json:"read_worst_ping_ms"` // during the reads
	// DefaultBudgetKeeps is how many of the most versions kept the default
	// HistoryBytes (DefaultHistoryBytesPerData × MaxDataBytes) would keep:
	// the levels lift it to keep them all.
	DefaultBudgetKeeps int `json:"default_budget_keeps"`
	DefaultBudgetBytes int `json:"default_budget_bytes"`
}

// BigLevel is one record of the big-profile history: its saves' latency
// (Driver Save, from the call to its return) once Versions versions are
// kept, and what they cost Redis and its other clients.
type BigLevel struct {
	Versions int     `json:"versions"`
	Kept     int     `json:"kept"` // as Versions listed them after the timed saves
	Save     Latency `json:"save"`
	// WorstPingMS is the other client's slowest PING during the timed saves,
	// FillWorstPingMS during the filling, SlowPings how many of all its
	// PINGs of the level took over 100 ms.
	WorstPingMS     float64 `json:"worst_ping_ms"`
	FillWorstPingMS float64 `json:"fill_worst_ping_ms"`
	SlowPings       int     `json:"slow_pings"`
	// HistoryBytes is MEMORY USAGE of the history hash after them.
	HistoryBytes float64 `json:"history_bytes"`
	// FillS is how long filling the record to Versions took.
	FillS float64 `json:"fill_s"`
}

// The big-profile history's settings.
const (
	bigDataBytes  = defaults.MaxDataBytes - 16<<10 // the largest a default driver saves, less a margin for growth
	bigChangePct  = 5
	bigPingEvery  = 2 * time.Millisecond
	bigSaves      = 30 // timed saves per level (quick: 8)
	bigQuickSaves = 8
	bigReads      = 5 // timed ReadVersion calls (quick: 2)
)

// bigLevels are the kept-version counts measured (quick: the first three);
// 0 is the baseline, a driver that keeps no version: what the save of the
// data alone costs.
var bigLevels = []int{0, 10, 100, 1000}

// runBigHistory fills Result.BigHistory.
func (r *runner) runBigHistory(ctx context.Context) error {
	node, _, ns, end, err := r.phaseNode(ctx, "bighist", time.Minute)
	if err != nil {
		return err
	}
	defer end()
	b := &BigHistory{ChangePct: bigChangePct, PingEveryMS: ms(bigPingEvery), PingProcess: r.env.Pinger != nil}
	r.res.BigHistory = b
	threshold, lastSlow := r.slowlogMark(ctx)
	b.SlowlogThresholdMS = threshold

	pinger := r.startPinger(ctx)
	defer pinger.stop()
	levels, saves, reads := bigLevels, bigSaves, bigReads
	if r.cfg.Quick {
		levels, saves, reads = bigLevels[:3], bigQuickSaves, 2
	}
	rng := rand.New(rand.NewPCG(41, 41))
	base := newBigProfile(bigDataBytes, rng)
	var last *datadriver.Driver[gameProfile]
	for _, n := range levels {
		drv, err := datadriver.NewDriver(node, datadriver.Config[gameProfile]{Name: "Big" + strconv.Itoa(n),
			History: cmp.Or(n, -1), HistoryEvery: time.Millisecond, HistoryBytes: 1 << 40}) // the count alone bounds them
		if err != nil {
			return err
		}
		r.progress("  %d kept versions", n)
		l, err := r.bigLevel(ctx, drv, ns, n, saves, base.clone(), rng, pinger)
		if err != nil {
			return fmt.Errorf("%d versions: %w", n, err)
		}
		b.Levels = append(b.Levels, l)
		last = drv
	}
	readStart := time.Now()
	if b.ReadOldest, b.ReadOldestAllocBytes, err = readOldestAlloc(ctx, last, "big", reads); err != nil {
		return err
	}
	b.ReadWorstPingMS, _ = pinger.worst(readStart, time.Now())
	b.DataBytes = base.size
	b.DefaultBudgetBytes = defaults.HistoryBytesPerData * defaults.MaxDataBytes
	if b.DefaultBudgetKeeps, err = budgetKeeps(ctx, r.admin, record.Key(ns, last.Name(), "big"), b.DefaultBudgetBytes); err != nil {
		return err
	}
	b.WorstPingMS, b.Pings = pinger.worst(time.Time{}, time.Now())
	b.SlowestCallMS, b.SlowestCall = r.slowestSince(ctx, lastSlow)
	return nil
}

// bigLevel fills the record "big" of drv (which keeps n versions) with n+1
// saves, then times saves more.
func (r *runner) bigLevel(ctx context.Context, drv *datadriver.Driver[gameProfile], ns string, n, saves int,
	prof *bigProfile, rng *rand.Rand, pinger *pinger) (BigLevel, error) {
	l := BigLevel{Versions: n}
	p, err := drv.Load(ctx, "big", datadriver.LoadOptions{})
	if err != nil {
		return l, err
	}
	defer func() { _ = p.Release(context.WithoutCancel(ctx)) }()
	first := true
	save := func() (time.Duration, error) {
		if err := p.Update(func(d *gameProfile) {
			if first {
				*d = *prof.clone().gameProfile
			}
			prof.change(d, bigChangePct, rng)
		}); err != nil {
			return 0, err
		}
		first = false
		if err := sleep(ctx, time.Millisecond); err != nil { // HistoryEvery: every save keeps a version
			return 0, err
		}
		start := time.Now()
		err := p.Save(ctx)
		return time.Since(start), err
	}
	fillStart := time.Now()
	for i := range n + 1 {
		if _, err := save(); err != nil {
			return l, fmt.Errorf("fill, save %d: %w", i+1, err)
		}
	}
	l.FillS = round1(time.Since(fillStart).Seconds())
	l.FillWorstPingMS, _ = pinger.worst(fillStart, time.Now())
	samples := make([]float64, 0, saves)
	start := time.Now()
	for i := range saves {
		d, err := save()
		if err != nil {
			return l, fmt.Errorf("timed save %d: %w", i+1, err)
		}
		samples = append(samples, ms(d))
	}
	l.Save = summarize(samples)
	l.WorstPingMS, _ = pinger.worst(start, time.Now())
	l.SlowPings = pinger.over(fillStart, time.Now(), 100*time.Millisecond)
	vs, err := drv.Versions(ctx, "big")
	if err != nil {
		return l, err
	}
	l.Kept = len(vs) - 1
	rk := record.Key(ns, drv.Name(), "big")
	if r.mem {
		if used, err := r.admin.MemoryUsage(ctx, record.HistoryKey(rk), 0).Result(); err == nil {
			l.HistoryBytes = float64(used)
		}
	}
	return l, nil
}

// budgetKeeps is how many of the record rk's kept versions, newest first,
// fit in budget bytes (the newest always).
func budgetKeeps(ctx context.Context, rdb *redis.Client, rk string, budget int) (int, error) {
	res, err := record.Versions(ctx, rdb, rk)
	if err != nil {
		return 0, err
	}
	n, total := 0, 0
	for i := len(res.Kept) - 1; i >= 0; i-- {
		if total += res.Kept[i].Bytes; n > 0 && total > budget {
			break
		}
		n++
	}
	return n, nil
}

// readOldestAlloc times Driver.ReadVersion of key's oldest kept version,
// reads times, and returns the bytes each read allocated (mean).
func readOldestAlloc(ctx context.Context, drv *datadriver.Driver[gameProfile], key string, reads int) (Latency, float64, error) {
	vs, err := drv.Versions(ctx, key)
	if err != nil {
		return Latency{}, 0, err
	}
	if len(vs) < 2 {
		return Latency{}, 0, errors.New("no kept version to read")
	}
	oldest := vs[len(vs)-1]
	var samples []float64
	var alloc uint64
	var before, after runtime.MemStats
	for range reads {
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		if _, err := drv.ReadVersion(ctx, key, oldest.At); err != nil {
			return Latency{}, 0, fmt.Errorf("ReadVersion of ver %d: %w", oldest.Ver, err)
		}
		samples = append(samples, ms(time.Since(start)))
		runtime.ReadMemStats(&after)
		alloc += after.TotalAlloc - before.TotalAlloc
	}
	return summarize(samples), float64(alloc) / float64(reads), nil
}

// bigProfile is a gameProfile of a few MiB, with its value names sorted
// once: change picks values at random rather than shuffling them all.
type bigProfile struct {
	*gameProfile
	items, quests, stats []string
	size                 int // its msgpack, when made
}

// newBigProfile returns a profile whose msgpack is about size bytes.
func newBigProfile(size int, rng *rand.Rand) *bigProfile {
	g := newGameProfile(size, rng)
	b := &bigProfile{gameProfile: g, items: sortedKeys(g.Inventory), quests: sortedKeys(g.Quests), stats: sortedKeys(g.Stats)}
	b.size = g.encodedSize()
	return b
}

// clone is a deep copy of b.
func (b *bigProfile) clone() *bigProfile {
	c := *b
	c.gameProfile = b.gameProfile.clone()
	return &c
}

// change changes pct % of d's values (d has b's names), picked at random.
func (b *bigProfile) change(d *gameProfile, pct int, rng *rand.Rand) {
	n := b.values() * pct / 100
	for range n {
		switch k := rng.IntN(b.values()); {
		case k < 5:
			d.Coins += rng.Int64N(5000) - 1000
		case k < 5+len(b.items):
			d.Inventory[b.items[k-5]] = rng.Int64N(300)
		case k < 5+len(b.items)+2*len(b.quests):
			name := b.quests[(k-5-len(b.items))/2]
			q := d.Quests[name]
			q.Step++
			d.Quests[name] = q
		default:
			d.Stats[b.stats[rng.IntN(len(b.stats))]] += 1.5
		}
	}
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// slowlogMark returns SLOWLOG's threshold (ms) and the id of its newest
// entry (-1: none), so that slowestSince reads only the phase's.
func (r *runner) slowlogMark(ctx context.Context) (float64, int64) {
	threshold := 10.0 // Redis's default slowlog-log-slower-than
	if cfg, err := r.admin.ConfigGet(ctx, "slowlog-log-slower-than").Result(); err == nil {
		if us, err := strconv.ParseFloat(cfg["slowlog-log-slower-than"], 64); err == nil {
			threshold = us / 1000
		}
	}
	last := int64(-1)
	if logs, err := r.admin.SlowLogGet(ctx, 1).Result(); err == nil && len(logs) > 0 {
		last = logs[0].ID
	}
	return threshold, last
}

// slowestSince is the longest command SLOWLOG holds after entry after
// (ms), and the command's name.
func (r *runner) slowestSince(ctx context.Context, after int64) (float64, string) {
	logs, err := r.admin.SlowLogGet(ctx, 128).Result()
	if err != nil {
		return 0, ""
	}
	var worst time.Duration
	name := ""
	for _, l := range logs {
		if l.ID > after && l.Duration > worst {
			worst = l.Duration
			if len(l.Args) > 0 {
				name = l.Args[0]
			}
		}
	}
	return round3(ms(worst)), name
}

// writeText prints the big-profile history figures.
func (b *BigHistory) writeText(ew *errWriter) {
	ew.printf("\nBig profile history (%d bytes of msgpack, %d %% of the values changed and a version kept per save;\n",
		b.DataBytes, b.ChangePct)
	who := "a goroutine of the bench: its figure includes the bench's own pauses"
	if b.PingProcess {
		who = "a process of its own"
	}
	ew.printf("another client, %s, PINGs every %.0f ms):\n", who, b.PingEveryMS)
	ew.printf("  %8s  %6s  %-38s  %-26s  %s\n", "versions", "kept", "save p50 / p99 / max (ms)",
		"worst PING: saves / fill (ms)", "history bytes")
	for _, l := range b.Levels {
		ew.printf("  %8d  %6d  %10.1f / %10.1f / %10.1f  %12.1f / %11.1f  %.0f (filled in %.0f s; %d PINGs over 100 ms)\n",
			l.Versions, l.Kept, l.Save.P50MS, l.Save.P99MS, l.Save.MaxMS, l.WorstPingMS, l.FillWorstPingMS, l.HistoryBytes,
			l.FillS, l.SlowPings)
	}
	ew.printf("  worst PING over the whole phase (filling included): %.1f ms of %d\n", b.WorstPingMS, b.Pings)
	if b.SlowestCallMS > 0 {
		ew.printf("  slowest single Redis command (SLOWLOG): %.1f ms (%s)\n", b.SlowestCallMS, b.SlowestCall)
	} else {
		ew.printf("  slowest single Redis command (SLOWLOG): none over %.0f ms\n", b.SlowlogThresholdMS)
	}
	ew.printf("  ReadVersion of the oldest kept version: p50 %.1f ms, max %.1f ms, %.1f MiB allocated per read "+
		"(worst PING meanwhile %.1f ms)\n", b.ReadOldest.P50MS, b.ReadOldest.MaxMS, b.ReadOldestAllocBytes/(1<<20),
		b.ReadWorstPingMS)
	if b.DefaultBudgetBytes > 0 {
		ew.printf("  (the levels lift HistoryBytes; its default, %d MiB, keeps the newest %d of them)\n",
			b.DefaultBudgetBytes>>20, b.DefaultBudgetKeeps)
	}
}
