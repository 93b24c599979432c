package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// CheckJSON checks a Result's JSON (the command's --json output): every
// field is present, counts and rates are positive, percentiles are in
// order, ratios are the quotients of the throughputs they name, and the
// Redis-side figures are positive when machine.redis_stats says the server
// reported them. It checks no timing against a bound. It returns every
// problem found, joined.
func CheckJSON(data []byte) error {
	var root map[string]any
	if err := json.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	c := &checker{root: root}
	stats := c.boolean("machine", "redis_stats")
	osName, _ := c.get("machine", "os").(string)
	linux := strings.HasPrefix(osName, "linux/") // getrusage: the Go CPU figures
	for _, f := range []string{"cores", "go_version", "cpu_model", "redis_version", "nats_version", "load_before", "load_after"} {
		c.present("machine", f)
	}

	c.cycle(stats, linux)
	for _, f := range []string{"evalsha", "acquire", "save", "release", "send", "trivial", "floor"} {
		c.posIf(stats, "scripts_us", f)
	}

	c.latency("handoff")
	c.latency("handoff", "floor_evalsha")
	c.latency("handoff", "floor_nats")
	c.pos("handoff", "redis_calls_per_handoff")
	c.pos("handoff", "floor_composed_p50_ms")

	beat, ttl := c.pos("crash_takeover", "beat_ms"), c.pos("crash_takeover", "ttl_ms")
	if floor := c.pos("crash_takeover", "floor_ms"); math.Abs(floor-(beat+ttl)) > 0.01 {
		c.fail("crash_takeover.floor_ms %v is not beat_ms + ttl_ms (%v)", floor, beat+ttl)
	}
	lo, mean, hi := c.pos("crash_takeover", "min_ms"), c.pos("crash_takeover", "mean_ms"), c.pos("crash_takeover", "max_ms")
	if lo > mean+0.1 || mean > hi+0.1 {
		c.fail("crash_takeover: min %v, mean %v, max %v are not in order", lo, mean, hi)
	}
	c.pos("crash_takeover", "profiles")

	c.pos("presence", "servers")
	c.pos("presence", "beats")
	for _, f := range []string{"cmds_per_beat", "round_trips_per_beat", "script_us_per_beat", "redis_cpu_us_per_beat"} {
		c.posIf(stats, "presence", f)
	}
	c.pos("presence", "target_us_per_beat")
	c.boolean("presence", "meets_target")
	for _, f := range []string{"calls", "script_us_per_beat", "redis_cpu_us_per_beat"} {
		c.posIf(stats, "presence", "floor", f)
	}

	dataBytes := c.pos("memory", "data_bytes")
	if total := c.posIf(stats, "memory", "redis_bytes_per_record"); stats && total <= dataBytes {
		c.fail("memory.redis_bytes_per_record %v is not more than the data (%v bytes)", total, dataBytes)
	}
	c.posIf(stats, "memory", "record_bytes")
	c.posIf(stats, "memory", "redis_bytes_per_record_full_history")
	c.present("memory", "history_versions")
	c.pos("memory", "go_heap_per_profile")
	c.pos("memory", "go_objects_per_profile")
	c.present("memory", "goroutines_per_profile")
	c.history(stats)

	c.latency("messages")
	c.latency("messages", "send")
	c.flood()
	c.ratios(data)
	return errors.Join(c.errs...)
}

// cycle checks the session cycle at every concurrency: throughputs, their
// ratios, CPU per cycle, rounds, the floor when the run measured it, and
// the systems' commands.
func (c *checker) cycle(stats, linux bool) {
	cycle, _ := c.root["cycle"].(map[string]any)
	if len(cycle) == 0 {
		c.fail("cycle: no concurrency")
	}
	for players := range cycle {
		ours, raw, rs := c.pos("cycle", players, "ours_ops_s"), c.pos("cycle", players, "raw_ops_s"), c.pos("cycle", players, "redsync_ops_s")
		c.quotient(c.num("cycle", players, "ratio_raw"), ours, raw, "cycle."+players+".ratio_raw")
		c.quotient(c.num("cycle", players, "ratio_redsync"), ours, rs, "cycle."+players+".ratio_redsync")
		for _, f := range []string{"redis_cpu_us", "raw_redis_cpu_us", "redsync_redis_cpu_us"} {
			c.posIf(stats, "cycle", players, f)
		}
		for _, f := range []string{"go_cpu_us", "raw_go_cpu_us", "redsync_go_cpu_us"} {
			c.posIf(linux, "cycle", players, f)
		}
		for _, f := range []string{"ours_rounds_ops_s", "raw_rounds_ops_s", "redsync_rounds_ops_s"} {
			c.rounds("cycle", players, f)
		}
		if c.get("cycle", players, "floor_ops_s") != nil { // a result from before the floor has none
			c.floor(players, ours, raw, rs, stats, linux)
		}
	}
	for _, sys := range systems {
		c.present("cycle_commands", sys)
	}
}

// rounds fails when the rounds' throughputs at path are absent or none.
func (c *checker) rounds(path ...string) {
	if rounds, ok := c.get(path...).([]any); !ok || len(rounds) == 0 {
		c.fail("%s: no rounds", strings.Join(path, "."))
	}
}

// floor checks the session cycle's floor at players (its fields are
// optional, all or none): its throughput, rounds and CPU, and its ratios,
// the quotients of the throughputs they name (ours, raw and redsync's).
func (c *checker) floor(players string, ours, raw, rs float64, stats, linux bool) {
	floor := c.pos("cycle", players, "floor_ops_s")
	c.quotient(c.num("cycle", players, "floor_ratio_raw"), floor, raw, "cycle."+players+".floor_ratio_raw")
	c.quotient(c.num("cycle", players, "floor_ratio_redsync"), floor, rs, "cycle."+players+".floor_ratio_redsync")
	c.quotient(c.num("cycle", players, "ratio_floor"), ours, floor, "cycle."+players+".ratio_floor")
	c.posIf(stats, "cycle", players, "floor_redis_cpu_us")
	c.posIf(linux, "cycle", players, "floor_go_cpu_us")
	c.rounds("cycle", players, "floor_rounds_ops_s")
	c.present("cycle_commands", sysFloor)
}

// ratios checks the result's ratios: every one ComputeRatios makes of the
// result's own figures, each the quotient of the two figures it names,
// with the verdict its target gives.
func (c *checker) ratios(data []byte) {
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		c.fail("ratios: %v", err)
		return
	}
	want := ComputeRatios(&r)
	if len(r.Ratios) != len(want) {
		c.fail("ratios: %d, want %d", len(r.Ratios), len(want))
		return
	}
	for i, x := range r.Ratios {
		w := want[i]
		c.quotient(x.Ratio, x.Of, x.Base, "ratios."+x.Name)
		switch {
		case x.Name != w.Name || x.Of != w.Of || x.Base != w.Base:
			c.fail("ratios[%d]: %s %v ÷ %v, but the figures give %s %v ÷ %v", i, x.Name, x.Of, x.Base, w.Name, w.Of, w.Base)
		case (x.Met == nil) != (w.Met == nil) || (x.Met != nil && *x.Met != *w.Met):
			c.fail("ratios.%s: the verdict is not what its target gives", x.Name)
		case x.FloorMet != nil && (w.FloorMet == nil || *x.FloorMet != *w.FloorMet || x.Floor != w.Floor):
			// (a run from before the floors' verdicts has none: nothing to check)
			c.fail("ratios.%s: the floor's verdict is not what its floor and target give", x.Name)
		}
	}
}

// checker walks a decoded JSON object and collects problems.
type checker struct {
	root map[string]any
	errs []error
}

func (c *checker) fail(format string, a ...any) { c.errs = append(c.errs, fmt.Errorf(format, a...)) }

// get is the value at path, nil when absent.
func (c *checker) get(path ...string) any {
	var v any = c.root
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// present fails when path is absent.
func (c *checker) present(path ...string) {
	if c.get(path...) == nil {
		c.fail("%s: missing", strings.Join(path, "."))
	}
}

// num is the number at path; it fails when path is absent or not a number.
func (c *checker) num(path ...string) float64 {
	v, ok := c.get(path...).(float64)
	if !ok {
		c.fail("%s: missing or not a number", strings.Join(path, "."))
	}
	return v
}

// boolean is the boolean at path.
func (c *checker) boolean(path ...string) bool {
	v, ok := c.get(path...).(bool)
	if !ok {
		c.fail("%s: missing or not a boolean", strings.Join(path, "."))
	}
	return v
}

// pos is num, and fails when it is not positive.
func (c *checker) pos(path ...string) float64 {
	return c.posIf(true, path...)
}

// posIf is num, and fails when it is not positive and must be.
func (c *checker) posIf(must bool, path ...string) float64 {
	v := c.num(path...)
	if must && !(v > 0) {
		c.fail("%s: %v, want > 0", strings.Join(path, "."), v)
	}
	return v
}

// quotient fails when got is not a ÷ b (to the 3 decimals it is rounded to,
// of the rounded throughputs).
func (c *checker) quotient(got, a, b float64, name string) {
	if b == 0 {
		return
	}
	if want := a / b; math.Abs(got-want) > 0.0015+want*1e-3 {
		c.fail("%s %v is not %v ÷ %v = %v", name, got, a, b, want)
	}
}

// latency checks a Latency at path: n, and p50 ≤ p90 ≤ p99 ≤ max, all
// positive.
func (c *checker) latency(path ...string) {
	at := func(f string) float64 { return c.pos(append(path, f)...) }
	n, p50, p90, p99, hi := at("n"), at("p50_ms"), at("p90_ms"), at("p99_ms"), at("max_ms")
	_ = at("mean_ms")
	if !(p50 <= p90 && p90 <= p99 && p99 <= hi) {
		c.fail("%s: p50 %v, p90 %v, p99 %v, max %v are not in order", strings.Join(path, "."), p50, p90, p99, hi)
	}
	if n < 1 {
		c.fail("%s: n %v", strings.Join(path, "."), n)
	}
}

// history checks memory.history: every layout of the grid, the save's
// cost beside the whole-copy layout's, ReadVersion's latency.
func (c *checker) history(stats bool) {
	c.pos("memory", "history", "data_bytes")
	c.pos("memory", "history", "values")
	layouts, _ := c.get("memory", "history", "layouts").([]any)
	if len(layouts) != len(historyChanges)*len(historyVersions) {
		c.fail("memory.history.layouts: %d, want %d", len(layouts), len(historyChanges)*len(historyVersions))
	}
	for i, l := range layouts {
		m, _ := l.(map[string]any)
		for _, f := range []string{"redis_bytes_per_record", "whole_copy_bytes_per_record", "times_data"} {
			if v, _ := m[f].(float64); stats && v <= 0 {
				c.fail("memory.history.layouts[%d].%s %v is not positive", i, f, m[f])
			}
		}
	}
	for _, f := range []string{"redis_us", "whole_redis_us", "redis_cpu_us", "whole_redis_cpu_us"} {
		c.posIf(stats, "memory", "history", "save", f)
	}
	c.pos("memory", "history", "save", "go_us")
	c.pos("memory", "history", "save", "whole_go_us")
	c.latency("memory", "history", "read_oldest")
}
