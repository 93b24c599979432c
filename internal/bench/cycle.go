package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"
)

// The session cycle: one player session in three writes to Redis, run by
// ours, raw, redsync and floor (see doc.go). Each player is a goroutine with a key
// of its own, cycling it back to back until the round ends: its first cycle
// creates the record, the others load it from where its last release left
// it, as a returning player's session does.

// The systems of the session cycle, in the order each round runs them.
const (
	sysOurs    = "ours"
	sysRaw     = "raw"
	sysRedsync = "redsync"
	sysFloor   = "floor"
)

// systems are the systems of the cycle's charts and of every result's
// cycle_commands; cycleSystems those each round runs: floor (three calls
// of the floor script, floorCycle) after them, so that the three keep
// their order and a result from before the floor stays comparable.
var (
	systems      = []string{sysOurs, sysRaw, sysRedsync}
	cycleSystems = []string{sysOurs, sysRaw, sysRedsync, sysFloor}
)

// driverName is the driver of every measurement.
const driverName = "PlayerData"

// minDataBytes is the least data size the profile can be built at.
const minDataBytes = 64

// profileData is the profile of every measurement: a counter, a level and an
// opaque blob sized so that the encoded profile has the wanted size. The
// blob is random bytes: history versions of it do not compress.
type profileData struct {
	Coins int64  `msgpack:"coins"`
	Level int64  `msgpack:"level"`
	Blob  []byte `msgpack:"blob"`
}

// newBlob returns the blob that makes a profile encode to about size bytes.
func newBlob(size int, rng *rand.ChaCha8) []byte {
	blob := make([]byte, size-32)
	enc, _ := msgpack.Marshal(&profileData{Coins: 1000, Level: 1, Blob: blob})
	blob = make([]byte, len(blob)+size-len(enc))
	_, _ = rng.Read(blob)
	return blob
}

// CycleFigures are the session cycle at one concurrency: medians of the
// rounds.
type CycleFigures struct {
	Players     int     `json:"players"`
	OursOpsS    float64 `json:"ours_ops_s"`    // ours: cycles per second
	RawOpsS     float64 `json:"raw_ops_s"`     // raw go-redis
	RedsyncOpsS float64 `json:"redsync_ops_s"` // redsync
	// RatioRaw is OursOpsS ÷ RawOpsS, RatioRedsync OursOpsS ÷ RedsyncOpsS:
	// ours' throughput relative to the baseline's.
	RatioRaw     float64 `json:"ratio_raw"`
	RatioRedsync float64 `json:"ratio_redsync"`
	// FloorOpsS is the floor's cycles per second: three calls of the floor
	// script (floorCycle), the least a lock fencing every write with its
	// token in a script does per cycle. FloorRatioRaw is FloorOpsS ÷
	// RawOpsS, FloorRatioRedsync FloorOpsS ÷ RedsyncOpsS, RatioFloor
	// OursOpsS ÷ FloorOpsS. They and FloorRounds are absent from a result
	// measured before the floor ran (its FloorRedisCPUUS and FloorGoCPUUS
	// read 0).
	FloorOpsS         float64 `json:"floor_ops_s,omitempty"`
	FloorRatioRaw     float64 `json:"floor_ratio_raw,omitempty"`
	FloorRatioRedsync float64 `json:"floor_ratio_redsync,omitempty"`
	RatioFloor        float64 `json:"ratio_floor,omitempty"`
	// RedisCPUUS is the Redis CPU time (user + sys) per cycle of ours, in µs;
	// RawRedisCPUUS and RedsyncRedisCPUUS the baselines', FloorRedisCPUUS
	// the floor's.
	RedisCPUUS        float64 `json:"redis_cpu_us"`
	RawRedisCPUUS     float64 `json:"raw_redis_cpu_us"`
	RedsyncRedisCPUUS float64 `json:"redsync_redis_cpu_us"`
	FloorRedisCPUUS   float64 `json:"floor_redis_cpu_us"`
	// GoCPUUS is the CPU time this process (the game server side: the
	// Node, go-redis, msgpack) spent per cycle of ours, in µs, from
	// getrusage; RawGoCPUUS, RedsyncGoCPUUS and FloorGoCPUUS the baselines'
	// and the floor's. An embedded Redis or NATS counts in it.
	GoCPUUS        float64 `json:"go_cpu_us"`
	RawGoCPUUS     float64 `json:"raw_go_cpu_us"`
	RedsyncGoCPUUS float64 `json:"redsync_go_cpu_us"`
	FloorGoCPUUS   float64 `json:"floor_go_cpu_us"`
	// The rounds' throughputs, in the order they ran.
	OursRounds    []float64 `json:"ours_rounds_ops_s"`
	RawRounds     []float64 `json:"raw_rounds_ops_s"`
	RedsyncRounds []float64 `json:"redsync_rounds_ops_s"`
	FloorRounds   []float64 `json:"floor_rounds_ops_s,omitempty"`
}

// CommandCost is what one command costs Redis per cycle.
type CommandCost struct {
	CallsPerCycle float64 `json:"calls_per_cycle"`
	USPerCycle    float64 `json:"us_per_cycle"` // INFO commandstats usec
}

// cycleClients are the clients of the session cycle: one per system, each
// with the Config's pool, kept across rounds so that the pools stay warm.
type cycleClients struct {
	ours, raw, redsync, floor *redis.Client
	rs                        *redsync.Redsync
}

// round is one measured (or warm-up) round.
type round struct {
	cycles  int64
	elapsed time.Duration
	work    serverDelta
	goCPU   time.Duration // this process's CPU time over the round
}

func (r round) opsPerSec() float64 { return float64(r.cycles) / r.elapsed.Seconds() }

// runCycle runs the warm-up, then Rounds interleaved rounds of every system
// at every concurrency, and fills Result.Cycle and CycleCommands.
func (r *runner) runCycle(ctx context.Context) error {
	cc := &cycleClients{ours: r.client(r.cfg.PoolSize), raw: r.client(r.cfg.PoolSize), redsync: r.client(r.cfg.PoolSize),
		floor: r.client(r.cfg.PoolSize)}
	defer func() {
		_ = cc.ours.Close()
		_ = cc.raw.Close()
		_ = cc.redsync.Close()
		_ = cc.floor.Close()
	}()
	cc.rs = redsync.New(rsgoredis.NewPool(cc.redsync))
	rng := rand.NewChaCha8([32]byte{1})
	blob := newBlob(r.cfg.CycleDataBytes, rng)

	for _, players := range r.cfg.Players {
		for _, sys := range cycleSystems {
			if _, err := r.cycleRound(ctx, cc, sys, players, r.cfg.Warmup, fmt.Sprintf("warm-%d-%s", players, sys), blob); err != nil {
				return fmt.Errorf("warm-up %s at %d players: %w", sys, players, err)
			}
		}
	}
	rounds := map[cycleKey][]round{}
	work := map[string]*serverDelta{}
	cycles := map[string]int64{}
	for _, sys := range cycleSystems {
		work[sys] = &serverDelta{}
	}
	for i := range r.cfg.Rounds {
		r.progress("  cycle round %d/%d", i+1, r.cfg.Rounds)
		for _, players := range r.cfg.Players {
			for _, sys := range cycleSystems {
				rd, err := r.cycleRound(ctx, cc, sys, players, r.cfg.RoundTime, fmt.Sprintf("r%d-%d-%s", i, players, sys), blob)
				if err != nil {
					return fmt.Errorf("%s at %d players: %w", sys, players, err)
				}
				k := cycleKey{sys, players}
				rounds[k] = append(rounds[k], rd)
				work[sys].add(rd.work)
				cycles[sys] += rd.cycles
			}
		}
	}

	r.res.Cycle = map[string]CycleFigures{}
	for _, players := range r.cfg.Players {
		f := cycleFigures(players, rounds)
		r.res.Cycle[strconv.Itoa(players)] = f
		r.progress("  %2d players: ours %.0f/s, raw %.0f/s (×%.2f), redsync %.0f/s (×%.2f), floor %.0f/s (×%.2f); "+
			"CPU per cycle, Redis %.1f / %.1f / %.1f / %.1f µs, Go %.1f / %.1f / %.1f / %.1f µs",
			players, f.OursOpsS, f.RawOpsS, f.RatioRaw, f.RedsyncOpsS, f.RatioRedsync, f.FloorOpsS, f.RatioFloor,
			f.RedisCPUUS, f.RawRedisCPUUS, f.RedsyncRedisCPUUS, f.FloorRedisCPUUS, f.GoCPUUS, f.RawGoCPUUS, f.RedsyncGoCPUUS, f.FloorGoCPUUS)
	}
	r.res.CycleCommands = map[string]map[string]CommandCost{}
	for _, sys := range cycleSystems {
		m := map[string]CommandCost{}
		for name, c := range work[sys].cmds {
			n := float64(max(cycles[sys], 1))
			m[name] = CommandCost{CallsPerCycle: round3(float64(c.Calls) / n), USPerCycle: round3(float64(c.Usec) / n)}
		}
		r.res.CycleCommands[sys] = m
	}
	if ev := work[sysOurs].cmds["evalsha"]; ev.Calls > 0 {
		r.res.Scripts.EvalSHA = round3(float64(ev.Usec) / float64(ev.Calls))
	}
	return nil
}

// cycleKey names the rounds of one system at one number of players.
type cycleKey struct {
	sys     string
	players int
}

// cycleFigures sums up the rounds of every system at players players: the
// medians of their rounds, ours against the others, and the floor against
// the baselines.
func cycleFigures(players int, rounds map[cycleKey][]round) CycleFigures {
	ops := func(sys string) (rs []float64, opsS, redisCPU, goCPU float64) {
		var cpu, gcpu []float64
		for _, rd := range rounds[cycleKey{sys, players}] {
			n := float64(max(rd.cycles, 1))
			rs = append(rs, round1(rd.opsPerSec()))
			cpu = append(cpu, rd.work.cpuUS/n)
			gcpu = append(gcpu, float64(rd.goCPU.Microseconds())/n)
		}
		return rs, median(rs), round1(median(cpu)), round1(median(gcpu))
	}
	f := CycleFigures{Players: players}
	f.OursRounds, f.OursOpsS, f.RedisCPUUS, f.GoCPUUS = ops(sysOurs)
	f.RawRounds, f.RawOpsS, f.RawRedisCPUUS, f.RawGoCPUUS = ops(sysRaw)
	f.RedsyncRounds, f.RedsyncOpsS, f.RedsyncRedisCPUUS, f.RedsyncGoCPUUS = ops(sysRedsync)
	f.FloorRounds, f.FloorOpsS, f.FloorRedisCPUUS, f.FloorGoCPUUS = ops(sysFloor)
	f.RatioRaw = round3(ratio(f.OursOpsS, f.RawOpsS))
	f.RatioRedsync = round3(ratio(f.OursOpsS, f.RedsyncOpsS))
	f.FloorRatioRaw = round3(ratio(f.FloorOpsS, f.RawOpsS))
	f.FloorRatioRedsync = round3(ratio(f.FloorOpsS, f.RedsyncOpsS))
	f.RatioFloor = round3(ratio(f.OursOpsS, f.FloorOpsS))
	return f
}

// cycleRound runs one round of sys with players players for d under a fresh
// namespace (name), and deletes its keys after.
func (r *runner) cycleRound(ctx context.Context, cc *cycleClients, sys string, players int, d time.Duration,
	name string, blob []byte) (round, error) {
	ns := r.ns(name)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	var cycle func(ctx context.Context, w, i int) error
	switch sys {
	case sysOurs:
		node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "bench-" + randomID(), Redis: cc.ours,
			Namespace: ns, Logger: r.log})
		if err != nil {
			return round{}, err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			_ = node.Close(cctx)
		}()
		drv, err := datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName})
		if err != nil {
			return round{}, err
		}
		cycle = oursCycle(drv, blob)
	case sysRaw:
		cycle = rawCycle(cc.raw, ns, blob)
	case sysRedsync:
		cycle = redsyncCycle(cc.redsync, cc.rs, ns, players, blob)
	case sysFloor:
		cycle = floorCycle(cc.floor, ns, blob)
	}
	before := r.snapIf(ctx)
	cpu0, _ := processCPU()
	cycles, elapsed, err := runPlayers(ctx, players, d, cycle)
	cpu1, _ := processCPU()
	if err != nil {
		return round{}, err
	}
	return round{cycles: cycles, elapsed: elapsed, work: r.snapIf(ctx).since(before), goCPU: cpu1 - cpu0}, nil
}

// runPlayers runs cycle on players goroutines (player w, its i-th cycle)
// until d has passed, and returns how many cycles ended and the time from
// the start to the last player's end. The first error stops every player.
func runPlayers(ctx context.Context, players int, d time.Duration,
	cycle func(ctx context.Context, w, i int) error) (int64, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range players {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				if err := cycle(ctx, w, i); err != nil {
					cancel(err)
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, 0, err
	}
	return total.Load(), elapsed, nil
}

// playerKey is player w's key.
func playerKey(w int) string { return "player-" + strconv.Itoa(w) }

// oursCycle is one session: Load under the lock, Update, Save, Update,
// Release (the leave save: data written and lock cleared at once).
func oursCycle(drv *datadriver.Driver[profileData], blob []byte) func(ctx context.Context, w, i int) error {
	return func(ctx context.Context, w, _ int) error {
		p, err := drv.Load(ctx, playerKey(w), datadriver.LoadOptions{})
		if err != nil {
			return err
		}
		if err := p.Update(func(d *profileData) {
			if d.Blob == nil {
				d.Blob = blob
			}
			d.Coins++
		}); err != nil {
			return err
		}
		if err := p.Save(ctx); err != nil {
			return err
		}
		if err := p.Update(func(d *profileData) { d.Coins++ }); err != nil {
			return err
		}
		return p.Release(ctx)
	}
}

// rawWork is the work of one raw or redsync session on a record hash:
// HGETALL and decode, then two encoded HSETs (the second also clears a
// "lock" field, as a release would).
func rawWork(ctx context.Context, rdb *redis.Client, key string, i int, blob []byte) error {
	vals, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return err
	}
	var d profileData
	if b, ok := vals[record.FieldData]; ok {
		if err := msgpack.Unmarshal([]byte(b), &d); err != nil {
			return err
		}
	} else {
		d.Blob = blob
	}
	d.Coins++
	b, err := msgpack.Marshal(&d)
	if err != nil {
		return err
	}
	if err := rdb.HSet(ctx, key, record.FieldData, b, record.FieldVer, 2*i+1).Err(); err != nil {
		return err
	}
	d.Coins++
	if b, err = msgpack.Marshal(&d); err != nil {
		return err
	}
	return rdb.HSet(ctx, key, record.FieldData, b, record.FieldVer, 2*i+2, "lock", "").Err()
}

// rawCycle is the raw baseline: rawWork without a lock.
func rawCycle(rdb *redis.Client, ns string, blob []byte) func(ctx context.Context, w, i int) error {
	return func(ctx context.Context, w, i int) error {
		return rawWork(ctx, rdb, ns+":{"+playerKey(w)+"}", i, blob)
	}
}

// redsyncCycle is the redsync baseline: a redsync mutex (SET NX PX, then
// the delete script) around rawWork. Each player keeps its Mutex.
func redsyncCycle(rdb *redis.Client, rs *redsync.Redsync, ns string, players int,
	blob []byte) func(ctx context.Context, w, i int) error {
	mutexes := make([]*redsync.Mutex, players)
	for w := range mutexes {
		mutexes[w] = rs.NewMutex(ns + ":{" + playerKey(w) + "}:lock")
	}
	return func(ctx context.Context, w, i int) error {
		m := mutexes[w]
		if err := m.LockContext(ctx); err != nil {
			return fmt.Errorf("redsync lock: %w", err)
		}
		if err := rawWork(ctx, rdb, ns+":{"+playerKey(w)+"}", i, blob); err != nil {
			_, _ = m.UnlockContext(ctx)
			return err
		}
		ok, err := m.UnlockContext(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("redsync unlock: %w", err)
		case !ok:
			return errors.New("redsync unlock: the lock was not ours any more")
		}
		return nil
	}
}

// floorCycle is the floor of a fenced-script lock: three calls of the
// floor script (floorScript: TIME, an HMGET of the lock token, ver and
// data, an HSET of the data, ver and lock.at), one where a lock loads,
// saves and releases, with nothing around them but go-redis (EVALSHA,
// EVAL when the script is not cached) and msgpack encoding the player's
// data afresh for each, as rawWork does its writes. Every lock whose
// writes are fenced by a token read inside a script makes at least these
// calls, on records of the same size.
func floorCycle(rdb *redis.Client, ns string, blob []byte) func(ctx context.Context, w, i int) error {
	return func(ctx context.Context, w, i int) error {
		keys := []string{ns + ":{" + playerKey(w) + "}"}
		d := profileData{Coins: int64(3 * i), Level: 1, Blob: blob}
		for call := range 3 {
			d.Coins++
			b, err := msgpack.Marshal(&d)
			if err != nil {
				return err
			}
			if err := floorScript.Run(ctx, rdb, keys, b, 3*i+call+1).Err(); err != nil {
				return fmt.Errorf("floor script: %w", err)
			}
		}
		return nil
	}
}
