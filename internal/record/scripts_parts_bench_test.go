package record_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
)

// scriptPart is a part of a record script: the lines from the previous
// part's anchor to this one's (the first line of the next part, at the
// script's top level), or to the end for the last part ("").
type scriptPart struct{ name, anchor string }

// The parts of acquire.lua and save.lua on their common path, in order.
var (
	acquireParts = []scriptPart{
		{"call", "local t = redis.call('TIME')"},
		{"time", "local f = redis.pcall('HMGET'"},
		{"read", "-- A stored integer"},
		{"checks", "local how"},
		{"lock", "-- What is read next"},
		{"history-type", "local inbox, more"},
		{"now", "-- The new epoch"},
		{"write", "local answer"},
		{"answer", ""},
	}
	saveParts = []scriptPart{
		{"call", "local t = redis.call('TIME')"},
		{"time", "local f = redis.pcall('HMGET'"},
		{"read", "local token, ver, epoch"},
		{"now", "-- A stored integer"},
		{"checks", "-- The options"},
		{"rules", "local code = "},
		{"write", "  if tries then"},
		{"answer", ""},
	}
)

// cutBefore is src ending (do return 1 end) just before its first line that
// starts with anchor; src itself for "".
func cutBefore(tb testing.TB, src, anchor string) string {
	tb.Helper()
	if anchor == "" {
		return src
	}
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, anchor) {
			return strings.Join(append(append(lines[:i:i], "do return 1 end"), lines[i:]...), "\n")
		}
	}
	tb.Fatalf("no line of the script starts with %q: update the parts", anchor)
	return ""
}

// BenchmarkScriptParts attributes the Redis time of acquire, save and
// release (save.lua in release mode) to their parts, as BenchmarkScripts
// measures whole calls: each part's figure ("<script>.<part>-µs") is the
// INFO commandstats time per call of the script cut short after that part
// less the time of the script cut short before it (medians over the
// iterations), on the same records (a cycle's: 512 bytes of data, history
// kept, released), every cut run once per iteration, interleaved. "call" is the call itself with its KEYS
// and ARGV ("return 1" at the script's top); "floor7-µs" is the floor script
// of BenchmarkScripts (TIME, an HMGET of 7 fields, an HSET of 8 with the
// data) and "trivial-µs" a bare "return 1", in the same iterations. Needs a
// real redis-server; Redis running other clients' scripts meanwhile
// inflates the figures (a private one: REDIS_URL).
//
//	go test -run '^$' -bench ScriptParts -benchtime 3s ./internal/record/
func BenchmarkScriptParts(b *testing.B) {
	r := testsupport.StartRedis(b)
	if r.Kind == testsupport.KindMiniredis {
		b.Skip("needs a real redis-server: miniredis has no INFO commandstats")
	}
	ctx := context.Background()
	rdb := r.Client(b).(*redis.Client)
	admin := r.Client(b).(*redis.Client)
	blob := []byte(strings.Repeat("\x93\x01\xa4gold", 64))
	keys := make([]string, benchKeys)
	tokens := make([]string, benchKeys)
	for i := range keys {
		keys[i] = record.Key(r.Namespace, "parts", "player-"+strconv.Itoa(i))
	}
	gen := 0
	calls := func(s *rscript.Script, call func(i int, k string) rscript.Call) []rscript.Call {
		out := make([]rscript.Call, len(keys))
		for i, k := range keys {
			out[i] = call(i, k)
			if s != nil {
				out[i].Script = s
			}
		}
		return out
	}
	acquire := func(i int, k string) rscript.Call {
		return record.AcquireArgs{Job: "parts-a", Token: tokens[i], Presence: true, MaxAge: 4 * time.Minute,
			Skew: time.Minute, Format: record.Format, MessagesPerRead: 1}.Call(k).Call
	}
	write := func(mode record.WriteMode) func(i int, k string) rscript.Call {
		return func(i int, k string) rscript.Call {
			return record.SaveArgs{Mode: mode, Token: tokens[i], Data: blob, Sum: "0badcafe"}.Call(k).Call
		}
	}
	run := func(cs []rscript.Call) benchWork {
		before := benchSnap(ctx, b, admin)
		if _, errs := rscript.Run(ctx, rdb, cs); errs[0] != nil {
			b.Fatal(errs[0])
		}
		return benchSnap(ctx, b, admin).since(before)
	}
	newTokens := func() {
		gen++
		for i := range tokens {
			tokens[i] = "parts-" + strconv.Itoa(gen) + "-" + strconv.Itoa(i)
		}
	}
	acquireAll := func() { newTokens(); run(calls(nil, acquire)) }
	releaseAll := func() { run(calls(nil, write(record.ModeRelease))) }
	acquireAll()
	releaseAll()
	for _, k := range keys { // a version was kept once: acquire checks the history's type
		if err := rdb.HSet(ctx, k, "hist.at", time.Now().UnixMilli()).Err(); err != nil {
			b.Fatal(err)
		}
	}

	// A phase measures one cut: the records are released before and after.
	type phase struct {
		name string
		f    func() benchWork
	}
	var phases []phase
	readLua := func(name string) string {
		src, err := os.ReadFile("lua/" + name + ".lua")
		if err != nil {
			b.Fatal(err)
		}
		return record.ExpandLua(string(src))
	}
	for _, p := range acquireParts {
		s := rscript.New("acquire-"+p.name, cutBefore(b, readLua("acquire"), p.anchor))
		phases = append(phases, phase{"acquire." + p.name, func() benchWork {
			newTokens()
			w := run(calls(s, acquire))
			releaseAll() // lost where the cut took no lock
			return w
		}})
	}
	for _, mode := range []record.WriteMode{record.ModeSave, record.ModeRelease} {
		for _, p := range saveParts {
			s := rscript.New(string(mode)+"-"+p.name, cutBefore(b, readLua("save"), p.anchor))
			phases = append(phases, phase{string(mode) + "." + p.name, func() benchWork {
				acquireAll()
				w := run(calls(s, write(mode)))
				releaseAll() // already released where the cut released
				return w
			}})
		}
	}
	floor, trivial := rscript.New("floor7", benchFloorLua), rscript.New("trivial", "return 1")
	phases = append(phases,
		phase{"floor7", func() benchWork {
			return run(calls(floor, func(i int, k string) rscript.Call {
				return rscript.Call{Keys: []string{k + ":floor"}, Args: []any{tokens[i], "parts-a", blob}}
			}))
		}},
		phase{"trivial", func() benchWork {
			return run(calls(trivial, func(_ int, k string) rscript.Call { return rscript.Call{Keys: []string{k}} }))
		}})

	samples := make([][]float64, len(phases)) // µs per call, one per iteration
	for b.Loop() {
		for i, ph := range phases {
			if w := ph.f(); w.calls > 0 {
				samples[i] = append(samples[i], float64(w.usec)/float64(w.calls))
			}
		}
	}
	prev := 0.0
	for i, ph := range phases {
		if len(samples[i]) == 0 {
			continue
		}
		slices.Sort(samples[i])
		us := samples[i][len(samples[i])/2] // the median: a burst of other load moves it least
		script, part, cut := strings.Cut(ph.name, ".")
		switch {
		case !cut:
			b.ReportMetric(us, script+"-µs")
		case part == "call":
			b.ReportMetric(us, ph.name+"-µs")
		default:
			b.ReportMetric(us-prev, ph.name+"-µs")
		}
		if part == "answer" {
			b.ReportMetric(us, script+"-µs")
		}
		prev = us
	}
}
