package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Warning is the line printed above figures measured on embedded servers.
const Warning = "WARNING: embedded servers (in this process): these figures are NOT representative. " +
	"Pass --redis and --nats (or REDIS_URL / NATS_URL) to measure a real Redis and NATS."

// WriteText writes the result for people: the machine, then each
// measurement, then the notes.
func (r *Result) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	r.writeMachine(ew)
	if r.BigHistory != nil {
		r.BigHistory.writeText(ew)
		r.writeNotes(ew)
		return ew.err
	}
	r.writeCycle(ew)

	sc, st := r.Scripts, r.stats()
	ew.printf("\nScripts (server-side µs per call, %d calls each): acquire %s, save %s, release %s, send %s; trivial script %s;\n",
		sc.Calls, st.f("%.1f", sc.Acquire), st.f("%.1f", sc.Save), st.f("%.1f", sc.Release), st.f("%.1f", sc.Send), st.f("%.1f", sc.Trivial))
	ew.printf("  mean EVALSHA of the cycle rounds %s; time of the Redis commands inside: acquire %s, save %s, release %s\n",
		st.f("%.1f", sc.EvalSHA), st.f("%.1f", sc.InnerUS["acquire"]), st.f("%.1f", sc.InnerUS["save"]), st.f("%.1f", sc.InnerUS["release"]))

	h := r.Handoff
	ew.printf("\nHandoff (stale connection, %d handoffs, B's Join call → B holds the profile):\n", h.N)
	ew.printf("  handoff         p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f  (%.1f Redis round trips per handoff)\n",
		h.P50MS, h.P90MS, h.P99MS, h.MaxMS, h.RedisCallsPerHandoff)
	ew.printf("  floor EVALSHA   p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f\n", h.FloorEvalSHA.P50MS, h.FloorEvalSHA.P90MS,
		h.FloorEvalSHA.P99MS, h.FloorEvalSHA.MaxMS)
	ew.printf("  floor NATS req  p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f\n", h.FloorNATS.P50MS, h.FloorNATS.P90MS,
		h.FloorNATS.P99MS, h.FloorNATS.MaxMS)
	ew.printf("  composed floor  p50 %7.3f ms  (%.1f EVALSHA + 1 NATS request/reply, in series)\n", h.FloorComposedP50MS, h.RedisCallsPerHandoff)
	ew.printf("  floor as one    p50 %7.3f ms  (EVALSHA, a request/reply whose responder runs one, EVALSHA: timed as one operation; "+
		"handoff ÷ it %.2f×)\n", h.FloorSerial.P50MS, ratio(h.P50MS, h.FloorSerial.P50MS))

	r.writeMove(ew)

	dr := r.Drain
	ew.printf("\nDrain (Node.Drain of %d players to two peers, by their session counts): %.0f ms, moved %v, %d failed\n",
		dr.Players, dr.MS, dr.Moved, dr.Failed)

	c := r.Crash
	ew.printf("\nCrash takeover (beat %.0f ms, presence TTL %.0f ms, every timing ×%g; %d crashes, %d profiles):\n",
		c.BeatMS, c.TTLMS, c.Scale, c.Trials, c.Profiles)
	ew.printf("  crash → joiner holds: mean %.0f ms, min %.0f, max %.0f; floor TTL + beat = %.0f ms; mean at the default timings %.2f s\n",
		c.MeanMS, c.MinMS, c.MaxMS, c.FloorMS, c.MeanAtDefaultMS/1000)

	p := r.Presence
	ew.printf("\nPresence (%d servers beating every %.0f ms for %.1f s, %d beats, %d full checks), per server per beat:\n",
		p.Servers, p.BeatMS, p.WindowS, p.Beats, p.FullChecks)
	ew.printf("  %s Redis commands, %s round trips, %s µs of script, %s µs of Redis CPU; at the default 3 s beat these %d servers take %s of one Redis core\n",
		st.f("%.2f", p.CmdsPerBeat), st.f("%.2f", p.RoundTripsPerBeat), st.f("%.1f", p.ScriptUSPerBeat), st.f("%.1f", p.RedisCPUUSPerBeat),
		p.Servers, st.f("%.2f%%", p.RedisCPUPctAtDefaultBeat))
	met := "missed"
	if p.MeetsTarget {
		met = "met"
	}
	ew.printf("  target ≤ %.0f µs of script per beat: %s (%s µs); %d of %d beats carried a session count (each server's changes every %d beats)\n",
		p.TargetUSPerBeat, met, st.f("%.1f", p.ScriptUSPerBeat), p.CountWrites, p.Beats, p.SessionsChangeEvery)
	ew.printf("  floor (TIME and one HSET in a script, same servers and pace): %s µs of script, %s µs of Redis CPU per beat\n",
		st.f("%.1f", p.Floor.ScriptUSPerBeat), st.f("%.1f", p.Floor.RedisCPUUSPerBeat))

	mm := r.Memory
	ew.printf("\nMemory (%d records of %d data bytes, %d saves each):\n", mm.Records, mm.DataBytes, mm.Saves)
	mem := r.memory()
	ew.printf("  Redis %s bytes per record: record %s, history %s (%.1f versions), inbox %s; with a full history (%.0f versions) %s\n",
		mem.f("%.0f", mm.RedisBytesPerRecord), mem.f("%.0f", mm.RecordBytes), mem.f("%.0f", mm.HistoryBytes), mm.HistoryVersions,
		mem.f("%.0f", mm.InboxBytes), mm.FullHistoryVersions, mem.f("%.0f", mm.RedisBytesPerRecordFullHis))
	ew.printf("  a resident profile (%d held at once, at rest), once it has saved: Go heap %.0f bytes, %.1f heap objects, %.2f goroutines "+
		"(just loaded: %.0f bytes, %.1f objects)\n", mm.HeapProfiles, mm.GoHeapPerProfile, mm.GoObjectsPerProfile,
		mm.GoroutinesPerProfile, mm.GoHeapPerProfileLoaded, mm.GoObjectsPerProfileLoaded)
	if mm.BareHeapPerValue > 0 {
		ew.printf("  the same value held in a map without the library (the floor): %.0f bytes; the library's own part %.0f bytes\n",
			mm.BareHeapPerValue, mm.GoHeapPerProfile-mm.BareHeapPerValue)
	}
	mm.History.writeText(ew, mem, st)

	g := r.Messages
	ew.printf("\nMessages (%d, Send on B → OnMessage ran on A): p50 %.3f ms, p90 %.3f, p99 %.3f, max %.3f; Send itself p50 %.3f ms\n",
		g.N, g.P50MS, g.P90MS, g.P99MS, g.MaxMS, g.SendMS.P50MS)

	r.Flood.writeText(ew)
	r.writeRatios(ew)
	r.writeNotes(ew)
	return ew.err
}

// writeMove writes the move's latency beside its two floors.
func (r *Result) writeMove(ew *errWriter) {
	mv := r.Move
	ew.printf("\nMove (Profile.MoveTo, %d moves back and forth; MoveTo's call → the target holds the lock and the data):\n", mv.N)
	ew.printf("  MoveTo          p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f  (%.1f Redis round trips per move)\n",
		mv.P50MS, mv.P90MS, mv.P99MS, mv.MaxMS, mv.RedisCallsPerMove)
	ew.printf("  floor           p50 %7.3f ms  (1 NATS request/reply %.3f + 1 EVALSHA %.3f, in series; MoveTo ÷ floor %.2f×)\n",
		mv.FloorComposedP50MS, mv.FloorNATS.P50MS, mv.FloorEvalSHA.P50MS, ratio(mv.P50MS, mv.FloorComposedP50MS))
	ew.printf("  floor as one    p50 %7.3f ms  (the request/reply, then the EVALSHA, timed as one operation; MoveTo ÷ it %.2f×)\n",
		mv.FloorSerial.P50MS, ratio(mv.P50MS, mv.FloorSerial.P50MS))
	fs := mv.FloorSized
	ew.printf("  floor, its bytes p50 %6.3f ms  (NATS request/reply of %d B / %d B %.3f + the floor script writing %d B of data %.3f; "+
		"MoveTo ÷ it %.2f×)\n", fs.ComposedP50MS, fs.RequestBytes, fs.ReplyBytes, fs.NATS.P50MS, fs.DataBytes, fs.EvalSHA.P50MS,
		ratio(mv.P50MS, fs.ComposedP50MS))
	ew.printf("  target's Join   p50 %7.3f ms  p99 %7.3f  max %7.3f  (%.1f Redis round trips per Join)\n", mv.Join.P50MS,
		mv.Join.P99MS, mv.Join.MaxMS, mv.RedisCallsPerJoin)
}

// writeNotes writes the run's notes.
func (r *Result) writeNotes(ew *errWriter) {
	if len(r.Notes) > 0 {
		ew.printf("\nNotes:\n")
		for _, n := range r.Notes {
			ew.printf("  - %s\n", n)
		}
	}
}

// writeMachine writes the run's header: what ran where, and how loaded.
func (r *Result) writeMachine(ew *errWriter) {
	m := r.Machine
	kind := "full run"
	if r.Quick {
		kind = "quick run (fewer, shorter rounds)"
	}
	ew.printf("playerdata bench: %s, %s\n", kind, m.StartedAt.Format("2006-01-02 15:04 UTC"))
	ew.printf("  machine  %d cores (%s), GOMAXPROCS %d, %s, %s\n", m.Cores, orUnknown(m.CPUModel), m.GOMAXPROCS, m.GoVersion, m.OS)
	ew.printf("  servers  Redis %s%s, NATS %s%s\n", orUnknown(m.RedisVersion), embedded(m.EmbeddedRedis),
		orUnknown(m.NATSVersion), embedded(m.EmbeddedNATS))
	ew.printf("  load     %s at the start, %s at the end (1, 5, 15 min); %.0f s\n", orUnknown(m.LoadBefore), orUnknown(m.LoadAfter), m.DurationS)
	if m.EmbeddedRedis || m.EmbeddedNATS {
		ew.printf("\n%s\n", Warning)
	}
}

// writeCycle writes the session cycle's table and what each cycle ran
// inside Redis.
func (r *Result) writeCycle(ew *errWriter) {
	s, st := r.Settings, r.stats()
	ew.printf("\nSession cycle: load under the lock → save → save-and-release, %d-byte data, %s players each on its own key,\n",
		s.CycleDataBytes, r.playersList())
	ew.printf("go-redis pool %d; cycles/s, median of %d interleaved rounds of %.0f ms after a warm-up\n", s.PoolSize, s.Rounds, s.RoundMS)
	tw := tabwriter.NewWriter(ew, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  players\tours\traw\tredsync\tfloor\tours/raw\tours/redsync\tours/floor\tfloor/raw\tfloor/redsync\t"+
		"Redis CPU µs/cycle: ours\traw\tredsync\tfloor\tGo CPU µs/cycle: ours\traw\tredsync\tfloor\t")
	for _, p := range r.Players() {
		c := r.Cycle[strconv.Itoa(p)]
		fmt.Fprintf(tw, "  %d\t%.0f\t%.0f\t%.0f\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%s\t\n", p,
			c.OursOpsS, c.RawOpsS, c.RedsyncOpsS, floorFig("%.0f", c, c.FloorOpsS), c.RatioRaw, c.RatioRedsync,
			floorFig("%.2f", c, c.RatioFloor), floorFig("%.2f", c, c.FloorRatioRaw), floorFig("%.2f", c, c.FloorRatioRedsync),
			st.f("%.1f", c.RedisCPUUS), st.f("%.1f", c.RawRedisCPUUS), st.f("%.1f", c.RedsyncRedisCPUUS),
			floorFig("%s", c, st.f("%.1f", c.FloorRedisCPUUS)), c.GoCPUUS, c.RawGoCPUUS, c.RedsyncGoCPUUS,
			floorFig("%.1f", c, c.FloorGoCPUUS))
	}
	_ = tw.Flush()
	ew.printf("  ours: Driver.Load, Update, Save, Update, Release (3 round trips); raw: HGETALL, HSET, HSET (3, no lock);\n")
	ew.printf("  redsync: Lock (SET NX PX), HGETALL, HSET, HSET, Unlock (EVALSHA) (5);\n")
	ew.printf("  floor: 3 EVALSHA of the floor script (TIME, HMGET of the lock token, ver and data, HSET of data, ver, lock.at):\n")
	ew.printf("    the least any lock fencing every write with its token in a script does per cycle (3)\n")
	ew.printf("  per cycle inside Redis (INFO commandstats; a script's commands count in its EVALSHA time too):\n")
	for _, sys := range cycleSystems {
		if cmds, ok := r.CycleCommands[sys]; ok || sys != sysFloor {
			ew.printf("    %-8s %s\n", sys, commandLine(cmds, st))
		}
	}
}

// floorFig formats v, a figure of c's floor, with format, or says "—" when
// c has no floor (a result from before it).
func floorFig[T any](format string, c CycleFigures, v T) string {
	if c.FloorOpsS == 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// playersList lists the concurrencies of the cycle: "1, 8 and 64".
func (r *Result) playersList() string {
	var names []string
	for _, p := range r.Players() {
		names = append(names, strconv.Itoa(p))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// commandLine lists a system's commands per cycle, costliest first:
// "evalsha 3.00 calls 95.1 µs; hset 3.00 calls 12.0 µs; ..."; n/a when st
// says the server reports no command statistics.
func commandLine(m map[string]CommandCost, st measured) string {
	if !st.ok {
		return st.na()
	}
	if len(m) == 0 {
		return "(not reported by this Redis)"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]].USPerCycle > m[names[j]].USPerCycle })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f calls %.1f µs", n, m[n].CallsPerCycle, m[n].USPerCycle)
	}
	return strings.Join(parts, "; ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func embedded(e bool) string {
	if e {
		return " (EMBEDDED)"
	}
	return ""
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }

// measured says whether the server reported a kind of figure, and why not:
// a figure it did not report prints as n/a with the reason, never as 0.
type measured struct {
	ok       bool
	embedded bool // the Redis ran in this process (miniredis)
}

// stats is whether the Redis reported INFO cpu and commandstats (Redis
// CPU, script times, commands).
func (r *Result) stats() measured {
	return measured{ok: r.Machine.RedisStats, embedded: r.Machine.EmbeddedRedis}
}

// memory is whether the Redis answered MEMORY USAGE (Redis bytes).
func (r *Result) memory() measured {
	return measured{ok: r.Machine.RedisMemory, embedded: r.Machine.EmbeddedRedis}
}

// f formats v with format, or says n/a when the figure was not measured.
func (m measured) f(format string, v float64) string {
	if !m.ok {
		return m.na()
	}
	return fmt.Sprintf(format, v)
}

// Fig is f for the HTML report's template: v with digits decimals, or n/a.
func (m measured) Fig(digits int, v float64) string {
	return m.f("%."+strconv.Itoa(digits)+"f", v)
}

// na is what a figure that was not measured prints.
func (m measured) na() string {
	if m.embedded {
		return "n/a (embedded Redis)"
	}
	return "n/a (not reported by this Redis)"
}
