package presencecore_test

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// beatBeforeLua is beat.lua as it was before the fast path: TIME, INFO
// server, HMGET, HSET and HRANDFIELD on every beat.
//
//go:embed testdata/beat_before.lua
var beatBeforeLua string

// The load benchmark: 1,000 servers beat one Redis (or a three-master
// Redis Cluster), each a real Presence whose loop beats (LoopBeat: the fast
// path, and a full check every CheckEvery beats) a driver sends round by
// round, 32 at a time, moving a mock clock one Beat between rounds: the
// figures are per beat and do not depend on how fast this machine is.
const (
	loadServers = 1000
	// loadRounds is two check periods: the common beats and the full checks
	// in their real proportion.
	loadRounds = 2 * presencecore.CheckEvery
)

// beatCounter counts, by key, the beat and shard-mark scripts that answered.
type beatCounter struct {
	mu     sync.Mutex
	beats  map[string]int64 // by shard key
	marks  atomic.Int64
	total  atomic.Int64
	checks atomic.Int64 // beats that ran as a full check
}

func (c *beatCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *beatCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (c *beatCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			return err
		}
		in, ok := testsupport.Identify(cmd)
		switch {
		case !ok:
		case in.Script == presencescript.NameBeat:
			c.mu.Lock()
			c.beats[in.Keys[0]]++
			c.mu.Unlock()
			c.total.Add(1)
			if a, err := presencescript.ParseBeatArgs(in.Args); err == nil && a.Check {
				c.checks.Add(1)
			}
		case in.Script == presencescript.NameShards:
			c.marks.Add(1)
		}
		return nil
	}
}

// redisStats is what one redis-server says about its work.
type redisStats struct {
	calls   map[string]int64 // INFO commandstats calls, by command
	usec    map[string]int64 // INFO commandstats usec, by command
	cpuUsec int64            // used_cpu_sys + used_cpu_user, in µs
}

func readStats(tb testing.TB, rdb *redis.Client) redisStats {
	tb.Helper()
	ctx := context.Background()
	s := redisStats{calls: map[string]int64{}, usec: map[string]int64{}}
	cs, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(cs, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls[name] = n
			case "usec":
				s.usec[name] = n
			}
		}
	}
	cpu, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(cpu, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			s.cpuUsec += int64(f * 1e6)
		}
	}
	return s
}

// sub is b - a, without the two INFO calls of the readStats that made a
// (the INFO of b's own commandstats is not in it yet).
func (b redisStats) sub(a redisStats) redisStats {
	d := redisStats{calls: map[string]int64{}, usec: map[string]int64{}, cpuUsec: b.cpuUsec - a.cpuUsec}
	for k, v := range b.calls {
		d.calls[k] = v - a.calls[k]
		d.usec[k] = b.usec[k] - a.usec[k]
	}
	d.calls["info"] -= 2
	return d
}

func (s redisStats) totalCalls() int64 {
	var n int64
	for _, v := range s.calls {
		n += v
	}
	return n
}

// commandList formats calls per beat, most frequent first.
func (s redisStats) commandList(beats int64) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range s.calls {
		if v > 0 {
			all = append(all, kv{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var parts []string
	for _, e := range all {
		parts = append(parts, fmt.Sprintf("%s %.2f (%.1f µs each)", e.k, float64(e.v)/float64(beats), float64(s.usec[e.k])/float64(e.v)))
	}
	return strings.Join(parts, ", ")
}

// fleet is loadServers Presences on one client and one mock clock.
type fleet struct {
	mock    *mockclock.Mock
	counter *beatCounter
	ps      []*presencecore.Presence
	marks   int64 // shard marks expected so far
}

// startFleet makes loadServers Presences beating key with the given shard
// count and sends their first beat (a full check, with its shard mark).
func startFleet(b *testing.B, rdb redis.UniversalClient, key string, shards int) *fleet {
	b.Helper()
	f := &fleet{mock: mockclock.New(), counter: &beatCounter{beats: map[string]int64{}}}
	rdb.AddHook(f.counter)
	for i := range loadServers {
		p := newPresence(b, rdb, presencecore.Config{Key: key, JobID: fmt.Sprintf("server-%04d", i), Shards: shards, Clock: f.mock})
		f.ps = append(f.ps, p)
	}
	f.beat(b, true)
	return f
}

// beat sends one loop beat of every server, 32 at a time, and waits for the
// shard marks the full checks among them start (check tells whether this
// round is one).
func (f *fleet) beat(b *testing.B, check bool) {
	b.Helper()
	ctx := context.Background()
	next := make(chan *presencecore.Presence)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for p := range next {
				if err := presencecore.LoopBeat(ctx, p); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, p := range f.ps {
		next <- p
	}
	close(next)
	wg.Wait()
	if check {
		f.marks += loadServers
	}
	waitFor(b, time.Minute, "the shard marks", func() bool { return f.counter.marks.Load() >= f.marks })
}

// rounds moves the clock one Beat and beats every server, n times.
func (f *fleet) rounds(b *testing.B, n int) {
	b.Helper()
	for i := 1; i <= n; i++ {
		f.mock.Add(presencecore.DefaultBeat)
		f.beat(b, i%presencecore.CheckEvery == 0)
	}
}

// busiest returns the largest number of beats one key took, and the keys.
func (f *fleet) busiest() (most int64, keys int) {
	f.counter.mu.Lock()
	defer f.counter.mu.Unlock()
	for _, n := range f.counter.beats {
		most = max(most, n)
	}
	return most, len(f.counter.beats)
}

// perSecond turns beats per round into beats per second at the default
// Beat.
func perSecond(perRound float64) float64 { return perRound / presencecore.DefaultBeat.Seconds() }

// BenchmarkBeatLoad measures what 1,000 servers' beats cost Redis: commands
// and Redis time per beat before and after the fast path, and the busiest
// key's and master's share with 1 and 16 shards. Run it with
//
//	go test -run '^$' -bench BeatLoad -benchtime 1x ./presence/
//
// Each figure is logged and reported as a metric; nothing is asserted.
func BenchmarkBeatLoad(b *testing.B) {
	b.Run("one redis-server", func(b *testing.B) {
		r := testsupport.StartOwnRedis(b)
		if r.Kind != testsupport.KindRedisServer {
			b.Skip("needs a redis-server (INFO commandstats and cpu)")
		}
		admin := redis.NewClient(&redis.Options{Addr: r.Addr})
		defer admin.Close()
		for range b.N {
			before := benchBefore(b, r, admin)
			for _, shards := range []int{1, 16} {
				benchFleet(b, r, admin, shards, before)
			}
		}
	})
	b.Run("three-master cluster", func(b *testing.B) {
		c := testsupport.StartRedisCluster(b)
		for range b.N {
			for _, shards := range []int{1, 16} {
				benchCluster(b, c, shards)
			}
		}
	})
}

// benchBefore runs loadRounds beats of loadServers servers with the beat
// script as it was (INFO every beat) and returns the Redis time per beat
// in µs.
func benchBefore(b *testing.B, r *testsupport.Redis, admin *redis.Client) float64 {
	ctx := context.Background()
	rdb := r.Client(b, func(o *redis.Options) { o.PoolSize = 64 })
	script := redis.NewScript(beatBeforeLua)
	key := r.Key("before", presencecore.DefaultKeyName)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	beat := func() {
		var wg sync.WaitGroup
		jobs := make(chan int)
		for range 32 {
			wg.Go(func() {
				for i := range jobs {
					if err := script.EvalSha(ctx, rdb, []string{key}, fmt.Sprintf("server-%04d", i), presencecore.DefaultTTL.Milliseconds()).Err(); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for i := range loadServers {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
	}
	beat() // every server in the hash
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	s0 := readStats(b, admin)
	for range loadRounds {
		beat()
	}
	d := readStats(b, admin).sub(s0)
	beats := int64(loadServers * loadRounds)
	perBeat := float64(d.usec["evalsha"]) / float64(beats)
	b.Logf("before (INFO on every beat), 1 shard: %.2f Redis commands per beat (%s); script %.1f µs, Redis CPU %.1f µs per beat",
		float64(d.totalCalls())/float64(beats), d.commandList(beats), perBeat, float64(d.cpuUsec)/float64(beats))
	b.ReportMetric(float64(d.totalCalls())/float64(beats), "before-cmds/beat")
	b.ReportMetric(perBeat, "before-script-µs/beat")
	b.ReportMetric(float64(d.cpuUsec)/float64(beats), "before-cpu-µs/beat")
	return perBeat
}

// benchFleet runs loadRounds rounds of loadServers real Presences with
// shards shards against one redis-server.
func benchFleet(b *testing.B, r *testsupport.Redis, admin *redis.Client, shards int, before float64) {
	ctx := context.Background()
	rdb := r.Client(b, func(o *redis.Options) { o.PoolSize = 64 })
	key := r.Key(fmt.Sprintf("s%d", shards), presencecore.DefaultKeyName)
	f := startFleet(b, rdb, key, shards)
	f.counter.mu.Lock()
	clear(f.counter.beats)
	f.counter.mu.Unlock()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	s0 := readStats(b, admin)
	beats0, checks0, marks0 := f.counter.total.Load(), f.counter.checks.Load(), f.counter.marks.Load()
	f.rounds(b, presencecore.CheckEvery-1)
	fast := readStats(b, admin).sub(s0)
	fastBeats := int64(loadServers * (presencecore.CheckEvery - 1))
	fastScript := float64(fast.usec["evalsha"]) / float64(fastBeats)
	b.Logf("%d shard(s), the common beat alone (%d rounds without a full check): %.2f Redis commands per beat (%s); script %.1f µs, Redis CPU %.1f µs per beat",
		shards, presencecore.CheckEvery-1, float64(fast.totalCalls()-2)/float64(fastBeats), fast.commandList(fastBeats), fastScript, float64(fast.cpuUsec)/float64(fastBeats))
	b.ReportMetric(fastScript, fmt.Sprintf("s%d-fast-script-µs/beat", shards))
	f.rounds(b, loadRounds-(presencecore.CheckEvery-1))
	d := readStats(b, admin).sub(s0)
	beats := f.counter.total.Load() - beats0
	b.Logf("%d shard(s): %d beats, %d of them full checks, %d shard marks", shards,
		beats, f.counter.checks.Load()-checks0, f.counter.marks.Load()-marks0)
	script := float64(d.usec["evalsha"]) / float64(beats)
	busiest, keys := f.busiest()
	b.Logf("after, %d shard(s) (%d keys): %.2f Redis commands per beat (%s); script %.1f µs (%.0f%% of before), Redis CPU %.1f µs per beat; "+
		"busiest key %.0f beats/s at Beat=3s (%.1f%% of all)",
		shards, keys, float64(d.totalCalls())/float64(beats), d.commandList(beats), script, 100*script/before,
		float64(d.cpuUsec)/float64(beats), perSecond(float64(busiest)*loadServers/float64(beats)), 100*float64(busiest)/float64(beats))
	b.ReportMetric(float64(d.totalCalls())/float64(beats), fmt.Sprintf("s%d-cmds/beat", shards))
	b.ReportMetric(script, fmt.Sprintf("s%d-script-µs/beat", shards))
	b.ReportMetric(float64(d.cpuUsec)/float64(beats), fmt.Sprintf("s%d-cpu-µs/beat", shards))
	b.ReportMetric(perSecond(float64(busiest)*loadServers/float64(beats)), fmt.Sprintf("s%d-busiest-key-beats/s", shards))
}

// benchCluster runs loadRounds rounds of loadServers Presences with shards
// shards on the three-master cluster and reports each master's share.
func benchCluster(b *testing.B, c *testsupport.RedisCluster, shards int) {
	ctx := context.Background()
	rdb := c.Client(b, func(o *redis.ClusterOptions) { o.PoolSize = 32 })
	key := c.Key(fmt.Sprintf("s%d", shards), presencecore.DefaultKeyName)
	f := startFleet(b, rdb, key, shards)
	f.counter.mu.Lock()
	clear(f.counter.beats)
	f.counter.mu.Unlock()
	admins := make([]*redis.Client, len(c.Addrs))
	s0 := make([]redisStats, len(c.Addrs))
	for i := range c.Addrs {
		admins[i] = c.Node(i).Client(b)
		if err := admins[i].ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		s0[i] = readStats(b, admins[i])
	}
	beats0 := f.counter.total.Load()
	f.rounds(b, loadRounds)
	beats := float64(f.counter.total.Load() - beats0)
	perMaster := make(map[string]float64)
	f.counter.mu.Lock()
	for k, n := range f.counter.beats {
		perMaster[c.MasterOf(k)] += float64(n)
	}
	f.counter.mu.Unlock()
	// Rates at the real Beat: loadServers beats every 3 s in all.
	rate := func(n float64) float64 { return perSecond(n * loadServers / beats) }
	var shares []string
	var most float64
	for i, addr := range c.Addrs {
		d := readStats(b, admins[i]).sub(s0[i])
		most = max(most, perMaster[addr])
		shares = append(shares, fmt.Sprintf("master %d: %.0f%% of beats (%.0f beats/s), %.0f commands/s, CPU %.0f µs/s",
			i, 100*perMaster[addr]/beats, rate(perMaster[addr]), rate(float64(d.totalCalls())), rate(float64(d.cpuUsec))))
	}
	b.Logf("cluster, %d shard(s): %s", shards, strings.Join(shares, "; "))
	b.ReportMetric(100*most/beats, fmt.Sprintf("s%d-busiest-master-%%", shards))
}
