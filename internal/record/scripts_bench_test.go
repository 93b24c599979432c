package record_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkScripts measures what each record script costs Redis, beside
// baselines run on the same Redis in the same run: "floor", a script of the
// three calls a fenced write cannot do without (TIME, an HMGET of 7 fields,
// an HSET of 8 with the data), "trivial" (return 1), and "raw", the plain
// HGETALL and HSET of the same record. Each iteration runs every phase once
// over benchKeys records (one pipeline per phase): acquire of a free record
// of 512 bytes of data, acquire of a held one (answered LOCKED), save,
// save-and-release. Per phase it reports the script's execution time per
// call as Redis counts it ("-µs": INFO commandstats usec ÷ calls of
// EVALSHA) and Redis's CPU time per call ("-cpu-µs": INFO cpu, user + sys,
// which includes reading the call and writing its answer). Needs a real
// redis-server (REDIS_URL or on PATH); take the minimum of a few -count runs
// on a busy machine.
//
//	go test -run '^$' -bench Scripts -count 5 ./internal/record/
func BenchmarkScripts(b *testing.B) {
	r := testsupport.StartRedis(b)
	if r.Kind == testsupport.KindMiniredis {
		b.Skip("needs a real redis-server: miniredis has no INFO commandstats")
	}
	ctx := context.Background()
	rdb := r.Client(b).(*redis.Client)
	admin := r.Client(b).(*redis.Client)
	rng := rand.New(rand.NewPCG(1, 2))
	blobs := [2][]byte{make([]byte, 512), make([]byte, 512)}
	for _, bl := range blobs {
		for i := range bl {
			bl[i] = byte(rng.Uint32())
		}
	}
	keys := make([]string, benchKeys)
	tokens := make([]string, benchKeys)
	for i := range keys {
		keys[i] = record.Key(r.Namespace, "bench", "player-"+strconv.Itoa(i))
	}
	acq := func(job, token string) record.AcquireArgs {
		return record.AcquireArgs{Job: job, Token: token, Presence: true, MaxAge: 4 * time.Minute,
			Format: record.Format}
	}
	wr := func(mode record.WriteMode, token string, data []byte) record.SaveArgs {
		return record.SaveArgs{Mode: mode, Token: token, Job: "bench-a", Presence: true, Data: data,
			History: 24, HistoryEvery: time.Hour}
	}
	run := func(calls []rscript.Call, check func(v any) error) {
		vals, errs := rscript.Run(ctx, rdb, calls)
		for i := range calls {
			if errs[i] != nil {
				b.Fatal(errs[i])
			}
			if err := check(vals[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	acquired := func(v any) error {
		res, err := record.ParseAcquire(v)
		if err == nil && res.Outcome != record.Acquired {
			err = fmt.Errorf("acquire: %+v", res)
		}
		return err
	}
	written := func(v any) error {
		res, err := record.ParseSave(v)
		if err == nil && res.Outcome != record.Written {
			err = fmt.Errorf("save: %+v", res)
		}
		return err
	}
	locked := func(v any) error {
		res, err := record.ParseAcquire(v)
		if err == nil && res.Outcome != record.Locked {
			err = fmt.Errorf("acquire of a held lock: %+v", res)
		}
		return err
	}
	answered := func(any) error { return nil }
	n := 0
	nextTokens := func() {
		n++
		for i := range tokens {
			tokens[i] = "tok-" + strconv.Itoa(n) + "-" + strconv.Itoa(i)
		}
	}
	acquireAll := func() {
		nextTokens()
		calls := make([]rscript.Call, len(keys))
		for i, k := range keys {
			calls[i] = acq("bench-a", tokens[i]).Call(k).Call
		}
		run(calls, acquired)
	}
	lockedAll := func() {
		calls := make([]rscript.Call, len(keys))
		for i, k := range keys {
			calls[i] = acq("bench-b", "other-"+strconv.Itoa(i)).Call(k).Call
		}
		run(calls, locked)
	}
	writeAll := func(mode record.WriteMode) {
		calls := make([]rscript.Call, len(keys))
		for i, k := range keys {
			calls[i] = wr(mode, tokens[i], blobs[(n+len(mode))%2]).Call(k).Call
		}
		run(calls, written)
	}
	floor := rscript.New("floor", benchFloorLua)
	trivial := rscript.New("trivial", "return 1")
	floorAll := func() {
		calls := make([]rscript.Call, len(keys))
		for i, k := range keys {
			calls[i] = rscript.Call{Script: floor, Keys: []string{k + ":floor"},
				Args: []any{tokens[i], "bench-a", blobs[n%2]}}
		}
		run(calls, answered)
	}
	trivialAll := func() {
		calls := make([]rscript.Call, len(keys))
		for i, k := range keys {
			calls[i] = rscript.Call{Script: trivial, Keys: []string{k}}
		}
		run(calls, answered)
	}
	rawAll := func() {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				p.HGetAll(ctx, k+":raw")
				p.HSet(ctx, k+":raw", "data", blobs[n%2], "ver", i)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	phases := []struct {
		name string
		f    func()
		per  int // calls per key
	}{
		{"acquire", acquireAll, 1},
		{"locked", lockedAll, 1},
		{"save", func() { writeAll(record.ModeSave) }, 1},
		{"release", func() { writeAll(record.ModeRelease) }, 1},
		{"floor", floorAll, 1},
		{"trivial", trivialAll, 1},
		{"raw", rawAll, 2},
	}
	// The records start as a cycle leaves them: written and released.
	acquireAll()
	writeAll(record.ModeRelease)
	floorAll()
	rawAll()

	total := make([]benchWork, len(phases))
	for b.Loop() {
		for i, ph := range phases {
			before := benchSnap(ctx, b, admin)
			ph.f()
			total[i].add(benchSnap(ctx, b, admin).since(before))
		}
	}
	for i, ph := range phases {
		w := total[i]
		calls := float64(w.calls)
		if ph.name == "raw" {
			calls = float64(w.cmds)
		}
		if calls == 0 {
			continue
		}
		if ph.name != "raw" {
			b.ReportMetric(float64(w.usec)/calls, ph.name+"-µs")
			b.ReportMetric(float64(w.inner)/calls, ph.name+"-cmds")
		}
		b.ReportMetric(w.cpuUS/calls, ph.name+"-cpu-µs")
	}
}

// benchKeys is how many records each phase of BenchmarkScripts runs on.
const benchKeys = 200

// benchFloorLua is the least a fenced write does: TIME, an HMGET of 7
// fields, an HSET of 8 with the data.
const benchFloorLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = redis.call('HMGET', KEYS[1], 'lock.token', 'lock.job', 'released', 'released.ver', 'ver', 'trade', 'epoch')
local ver = (tonumber(f[5]) or 0) + 1
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'ver', ver, 'at', now, 'lock.token', ARGV[1], 'lock.job', ARGV[2],
  'lock.at', now, 'schema', 0, 'schema.min', 0)
return {'OK', ver}
`

// benchWork is Redis's work between two snapshots: EVALSHA calls and their
// usec, the commands run (inside scripts or alone), and CPU time.
type benchWork struct {
	calls, usec, inner, cmds int64
	cpuUS                    float64
}

func (w *benchWork) add(o benchWork) {
	w.calls += o.calls
	w.usec += o.usec
	w.inner += o.inner
	w.cmds += o.cmds
	w.cpuUS += o.cpuUS
}

func (w benchWork) since(o benchWork) benchWork {
	return benchWork{calls: w.calls - o.calls, usec: w.usec - o.usec, inner: w.inner - o.inner,
		cmds: w.cmds - o.cmds, cpuUS: w.cpuUS - o.cpuUS}
}

// benchSnap reads INFO cpu and INFO commandstats.
func benchSnap(ctx context.Context, tb testing.TB, rdb *redis.Client) benchWork {
	tb.Helper()
	info, err := rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var w benchWork
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			w.cpuUS += f * 1e6
			continue
		}
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" {
			continue
		}
		var calls, usec int64
		for kv := range strings.SplitSeq(v, ",") {
			kk, vv, _ := strings.Cut(kv, "=")
			switch kk {
			case "calls":
				calls, _ = strconv.ParseInt(vv, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(vv, 10, 64)
			}
		}
		if name == "evalsha" || name == "eval" {
			w.calls += calls
			w.usec += usec
		} else {
			w.inner += calls
		}
		w.cmds += calls
	}
	return w
}
