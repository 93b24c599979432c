package bench

import (
	"fmt"
	"strconv"
)

// A run's absolute times move with the machine (its load, its CPU, other
// jobs on two cores); a figure divided by its baseline measured in the
// same run moves much less. Ratios are those quotients, one per
// comparison the issue of the cost of a session (issue 35) sets a target
// for, so that two runs, or a run and the reference committed in
// docs/bench, can be compared.

// Ratio is one comparison of a run: a figure of ours (Of) beside its
// baseline or floor measured in the same run (Base), their quotient, and
// the target issue 35 sets, when it sets one.
type Ratio struct {
	// Name is the comparison's stable key ("cycle.8.vs_redsync").
	Name string `json:"name"`
	// What says in words what is divided by what.
	What string `json:"what"`
	// Of and Base are the two figures, in Unit; Ratio is Of ÷ Base (0 when
	// Base is 0: not measured).
	Of    float64 `json:"of"`
	Base  float64 `json:"base"`
	Unit  string  `json:"unit"`
	Ratio float64 `json:"ratio"`
	// Target is the target, nil when it sets none.
	Target *Target `json:"target,omitempty"`
	// Met says whether the target is met by this run (absent without a
	// target, or when the figure was not measured).
	Met *bool `json:"met,omitempty"`
	// Floor is the same comparison made of the floor measured in the same
	// run (its ratio, or its figure when the target bounds the figure), and
	// FloorMet whether that floor meets the target: a floor that misses it
	// says the target is out of reach on this machine and Redis, whatever
	// the library does. Both absent for a target without a floor, or when
	// the floor was not measured.
	Floor    float64 `json:"floor,omitempty"`
	FloorMet *bool   `json:"floor_met,omitempty"`
}

// Target is a bound on a ratio, or on the figure itself (OnFigure: an
// absolute bound such as 8 µs per script call, which the ratio beside its
// floor explains).
type Target struct {
	// AtLeast is true for a lower bound (≥), false for an upper one (≤).
	AtLeast  bool    `json:"at_least"`
	Value    float64 `json:"value"`
	OnFigure bool    `json:"on_figure"`
}

// String is the target as the issue writes it ("≥ 1.25×", "≤ 8 µs").
func (t Target) String() string {
	op := "≤"
	if t.AtLeast {
		op = "≥"
	}
	return op + " " + strconv.FormatFloat(t.Value, 'f', -1, 64) + "×"
}

// describe is the target, in the unit of its ratio's figure when it bounds
// the figure.
func (t Target) describe(unit string) string {
	s := t.String()
	if t.OnFigure {
		s = s[:len(s)-len("×")] + " " + unit
	}
	return s
}

// met says whether value (the ratio, or the figure) meets t.
func (t Target) met(ratio, figure float64) bool {
	v := ratio
	if t.OnFigure {
		v = figure
	}
	if t.AtLeast {
		return v >= t.Value
	}
	return v <= t.Value
}

// Issue 35's targets (never changed: ComputeRatios hands out copies).
var (
	targetVsRaw     = &Target{AtLeast: true, Value: 0.65}
	targetVsRedsync = &Target{AtLeast: true, Value: 1.25}
	targetGoCPU     = &Target{Value: 1.3}
	targetScriptUS  = &Target{Value: 8, OnFigure: true}
	targetHandoff   = &Target{Value: 1.4}
	targetPresence  = &Target{Value: 20, OnFigure: true}
	targetHeap      = &Target{Value: 1536, OnFigure: true}
	// No goroutine of its own: fewer than one per 20 profiles (a Node's
	// background goroutines may come and go while they are counted).
	targetGoroutine = &Target{Value: 0.05, OnFigure: true}
	// The crash takeover keeps its place: its mean within 2 % of its floor
	// (the floor is the worst case; a holder that crashes just after a
	// beat is taken over sooner).
	targetCrash = &Target{Value: 1.02}
)

// targetAt reports whether the cycle's throughput targets name players
// (8 and 64); Go CPU is held at every concurrency.
func targetAt(players int) bool { return players == 8 || players == 64 }

// ComputeRatios returns r's ratios, in a fixed order: the session cycle at
// each concurrency (with the floor's, when the run measured it), the scripts, the handoff, the move, the crash
// takeover, presence and the resident profile. A figure the run did not
// measure (no INFO on the server: its baseline is 0) gives a ratio of 0
// and no verdict.
func ComputeRatios(r *Result) []Ratio {
	var out []Ratio
	add := func(name, what string, of, base float64, unit string, t *Target) {
		x := Ratio{Name: name, What: what, Of: of, Base: base, Unit: unit, Ratio: round3(ratio(of, base))}
		if t != nil { // a copy: the caller may change its Ratios
			c := *t
			x.Target, t = &c, &c
		}
		if t != nil && ((t.OnFigure && of > 0) || (!t.OnFigure && of > 0 && base > 0)) {
			ok := t.met(x.Ratio, of)
			x.Met = &ok
		}
		out = append(out, x)
	}
	pick := func(at int, t *Target) *Target {
		if targetAt(at) {
			return t
		}
		return nil
	}
	for _, p := range r.Players() {
		c := r.Cycle[strconv.Itoa(p)]
		pre := "cycle." + strconv.Itoa(p) + "."
		at := fmt.Sprintf(" at %d players", p)
		if p == 1 {
			at = " at 1 player"
		}
		add(pre+"vs_raw", "cycles/s, ours ÷ raw go-redis"+at, c.OursOpsS, c.RawOpsS, "cycles/s", pick(p, targetVsRaw))
		add(pre+"vs_redsync", "cycles/s, ours ÷ redsync"+at, c.OursOpsS, c.RedsyncOpsS, "cycles/s", pick(p, targetVsRedsync))
		add(pre+"go_cpu_vs_raw", "Go CPU per cycle, ours ÷ raw"+at, c.GoCPUUS, c.RawGoCPUUS, "µs", targetGoCPU)
		add(pre+"redis_cpu_vs_raw", "Redis CPU per cycle, ours ÷ raw"+at, c.RedisCPUUS, c.RawRedisCPUUS, "µs", nil)
		if c.FloorOpsS > 0 { // measured (a run before the floor has none)
			floorRatios(add, pre, at, c)
		}
	}
	s := r.Scripts
	add("scripts.cycle_vs_floor", "a script call in the cycle (mean EVALSHA) ÷ the floor script", s.EvalSHA, s.Floor, "µs", targetScriptUS)
	for _, sc := range []struct {
		name string
		us   float64
	}{{"acquire", s.Acquire}, {"save", s.Save}, {"release", s.Release}} {
		add("scripts."+sc.name+"_vs_floor", sc.name+" ÷ the floor script (TIME, HMGET, HSET of the same bytes)",
			sc.us, s.Floor, "µs", targetScriptUS)
	}
	add("scripts.floor_vs_trivial", "the floor script ÷ return 1", s.Floor, s.Trivial, "µs", nil)
	add("handoff.p50_vs_floor", "handoff p50 ÷ its composed floor (EVALSHAs and a NATS request/reply in series)",
		r.Handoff.P50MS, r.Handoff.FloorComposedP50MS, "ms", targetHandoff)
	add("handoff.p50_vs_serial_floor", "handoff p50 ÷ its floor measured as one operation in a handoff's shape",
		r.Handoff.P50MS, r.Handoff.FloorSerial.P50MS, "ms", nil)
	add("move.p50_vs_floor", "MoveTo p50 ÷ its composed floor (one NATS request/reply and one EVALSHA)",
		r.Move.P50MS, r.Move.FloorComposedP50MS, "ms", nil)
	add("move.p50_vs_serial_floor", "MoveTo p50 ÷ its floor measured as one operation (a request/reply, then an EVALSHA)",
		r.Move.P50MS, r.Move.FloorSerial.P50MS, "ms", nil)
	add("crash.mean_vs_floor", "crash takeover mean ÷ TTL + beat", r.Crash.MeanMS, r.Crash.FloorMS, "ms", targetCrash)
	add("presence.script_vs_floor", fmt.Sprintf("presence script time per beat at %d servers ÷ the floor beat", r.Presence.Servers),
		r.Presence.ScriptUSPerBeat, r.Presence.Floor.ScriptUSPerBeat, "µs", targetPresence)
	m := r.Memory
	add("profile.heap_vs_data", "Go heap of a resident profile ÷ its encoded data", m.GoHeapPerProfile, float64(m.DataBytes), "B", targetHeap)
	if m.BareHeapPerValue > 0 { // measured (a run before the bare figure has none)
		add("profile.heap_vs_bare", "Go heap of a resident profile ÷ the same value held in a map without the library: "+
			"the floor of a resident profile", m.GoHeapPerProfile, m.BareHeapPerValue, "B", nil)
		add("profile.library_bytes", "Go heap of a resident profile beyond that floor: the library's own part",
			round1(m.GoHeapPerProfile-m.BareHeapPerValue), 0, "B", nil)
	}
	add("profile.objects", "heap objects of a resident profile", m.GoObjectsPerProfile, 0, "objects", nil)
	add("profile.goroutines", "goroutines of a resident profile", m.GoroutinesPerProfile, 0, "goroutines", nil)
	if m.GoObjectsPerProfile > 0 { // measured (a run before these figures has neither)
		t := *targetGoroutine
		ok := t.met(0, m.GoroutinesPerProfile)
		out[len(out)-1].Target, out[len(out)-1].Met = &t, &ok
	}
	floorVerdicts(out, floorsOf(r))
	return out
}

// floorsOf is, for each target that has a floor in r, that floor: the
// ratio the cycle's floor makes with the same baseline, the handoff's
// composed floor with fenced scripts beside the composed floor, or the
// floor's figure beside a target on the figure (the floor script, the
// floor beat, the same value held without the library). A floor not
// measured is 0.
func floorsOf(r *Result) map[string]float64 {
	f := map[string]float64{}
	for _, p := range r.Players() {
		c, pre := r.Cycle[strconv.Itoa(p)], "cycle."+strconv.Itoa(p)+"."
		f[pre+"vs_raw"] = ratio(c.FloorOpsS, c.RawOpsS)
		f[pre+"vs_redsync"] = ratio(c.FloorOpsS, c.RedsyncOpsS)
		f[pre+"go_cpu_vs_raw"] = ratio(c.FloorGoCPUUS, c.RawGoCPUUS)
	}
	for _, name := range []string{"cycle", "acquire", "save", "release"} {
		f["scripts."+name+"_vs_floor"] = r.Scripts.Floor
	}
	if h, s := r.Handoff, r.Scripts; h.FloorComposedP50MS > 0 && s.Trivial > 0 && s.Floor > s.Trivial {
		// The handoff's composed floor with each of its script calls
		// costing the floor script's Redis time instead of return 1's: the
		// least a handoff of a fenced-script lock does.
		fenced := h.FloorComposedP50MS + h.RedisCallsPerHandoff*(s.Floor-s.Trivial)/1000
		f["handoff.p50_vs_floor"] = fenced / h.FloorComposedP50MS
	}
	f["presence.script_vs_floor"] = r.Presence.Floor.ScriptUSPerBeat
	f["profile.heap_vs_data"] = r.Memory.BareHeapPerValue
	return f
}

// floorVerdicts gives each ratio with a target and a measured floor its
// floor and whether the floor meets the target.
func floorVerdicts(out []Ratio, floors map[string]float64) {
	for i := range out {
		x := &out[i]
		floor := round3(floors[x.Name])
		if x.Target == nil || x.Met == nil || floor <= 0 {
			continue
		}
		ok := x.Target.met(floor, floor)
		x.Floor, x.FloorMet = floor, &ok
	}
}

// floorRatios adds the session cycle's floor at one concurrency (pre names
// it, at says it): the floor beside raw and redsync, with no target (the
// floor is no library's: a floor below a target says the target is out of
// reach on this Redis), and ours beside the floor.
func floorRatios(add func(name, what string, of, base float64, unit string, t *Target), pre, at string, c CycleFigures) {
	const floor = "the floor (3 calls of the floor script)"
	add(pre+"floor_vs_raw", "cycles/s, "+floor+" ÷ raw"+at+": the least a fenced-script lock can reach",
		c.FloorOpsS, c.RawOpsS, "cycles/s", nil)
	add(pre+"floor_vs_redsync", "cycles/s, "+floor+" ÷ redsync"+at, c.FloorOpsS, c.RedsyncOpsS, "cycles/s", nil)
	add(pre+"vs_floor", "cycles/s, ours ÷ "+floor+at+": how far ours is from the floor",
		c.OursOpsS, c.FloorOpsS, "cycles/s", nil)
	add(pre+"floor_go_cpu_vs_raw", "Go CPU per cycle, "+floor+" ÷ raw"+at, c.FloorGoCPUUS, c.RawGoCPUUS, "µs", nil)
	add(pre+"floor_redis_cpu_vs_raw", "Redis CPU per cycle, "+floor+" ÷ raw"+at, c.FloorRedisCPUUS, c.RawRedisCPUUS, "µs", nil)
}
