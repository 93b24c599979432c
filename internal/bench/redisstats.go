package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// What the server says about its own work. Every figure is a delta between
// two snapshots (INFO cpu and INFO commandstats): the run never resets the
// server's statistics (CONFIG RESETSTAT would wipe an operator's counters
// and gives the same delta), so other clients of a shared Redis add to the
// figures: measure on a Redis of your own.

// cmdStat is one command's INFO commandstats line.
type cmdStat struct {
	Calls, Usec int64
}

// serverSnap is one snapshot of the server's work.
type serverSnap struct {
	cpuUS float64            // used_cpu_sys + used_cpu_user, µs
	cmds  map[string]cmdStat // by lower-case command name
}

// serverDelta is the work between two snapshots.
type serverDelta struct {
	cpuUS float64
	cmds  map[string]cmdStat
}

// ownCommands are the run's own commands, never counted as work measured.
var ownCommands = map[string]bool{"info": true, "ping": true, "hello": true, "client": true, "memory": true}

// probe learns whether the server reports CPU, command statistics and
// memory (miniredis does not), and notes what cannot be measured.
func (r *runner) probe(ctx context.Context) {
	if _, err := r.snap(ctx); err == nil {
		r.stats = true
	} else {
		r.note("This Redis does not answer INFO cpu / INFO commandstats (" + oneLine(err) +
			"): Redis CPU, script times and commands are shown as n/a (0 in --json, with machine.redis_stats false).")
	}
	key := r.ns("probe")
	if err := r.admin.Set(ctx, key, "x", 0).Err(); err == nil {
		if err := r.admin.MemoryUsage(ctx, key, 0).Err(); err == nil {
			r.mem = true
		} else {
			r.note("This Redis does not answer MEMORY USAGE key SAMPLES 0 (" + oneLine(err) + "): Redis bytes per record are shown as n/a (0 in --json, with machine.redis_memory false).")
		}
		_ = r.admin.Del(ctx, key).Err()
	}
}

// snap takes a snapshot of the server's work.
func (r *runner) snap(ctx context.Context) (serverSnap, error) {
	s := serverSnap{cmds: map[string]cmdStat{}}
	cpu, err := r.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return s, err
	}
	fields := infoFields(cpu)
	sys, err1 := strconv.ParseFloat(fields["used_cpu_sys"], 64)
	user, err2 := strconv.ParseFloat(fields["used_cpu_user"], 64)
	if err := errors.Join(err1, err2); err != nil {
		return s, fmt.Errorf("INFO cpu has no used_cpu_sys / used_cpu_user")
	}
	s.cpuUS = (sys + user) * 1e6
	cs, err := r.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return s, err
	}
	for name, v := range infoFields(cs) {
		name, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		var st cmdStat
		for kv := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch k {
			case "calls":
				st.Calls = n
			case "usec":
				st.Usec = n
			}
		}
		s.cmds[strings.ToLower(name)] = st
	}
	return s, nil
}

// snapIf takes a snapshot when the server reports its work, else a zero one.
func (r *runner) snapIf(ctx context.Context) serverSnap {
	if !r.stats {
		return serverSnap{cmds: map[string]cmdStat{}}
	}
	s, err := r.snap(ctx)
	if err != nil {
		r.note("A statistics snapshot failed (" + oneLine(err) + "): some Redis-side figures are low.")
	}
	return s
}

// since is the work from before to s.
func (s serverSnap) since(before serverSnap) serverDelta {
	d := serverDelta{cpuUS: s.cpuUS - before.cpuUS, cmds: map[string]cmdStat{}}
	for name, a := range s.cmds {
		if ownCommands[name] {
			continue
		}
		b := before.cmds[name]
		if c := (cmdStat{Calls: a.Calls - b.Calls, Usec: a.Usec - b.Usec}); c.Calls > 0 {
			d.cmds[name] = c
		}
	}
	return d
}

// scriptCalls sums the EVALSHA and EVAL lines: the script round trips.
func (d serverDelta) scriptCalls() cmdStat {
	a, b := d.cmds["evalsha"], d.cmds["eval"]
	return cmdStat{Calls: a.Calls + b.Calls, Usec: a.Usec + b.Usec}
}

// innerCalls sums every line but EVALSHA and EVAL: the commands that ran,
// in scripts or on their own.
func (d serverDelta) innerCalls() cmdStat {
	var s cmdStat
	for name, c := range d.cmds {
		if name != "evalsha" && name != "eval" {
			s.Calls += c.Calls
			s.Usec += c.Usec
		}
	}
	return s
}

// add adds e to d.
func (d *serverDelta) add(e serverDelta) {
	d.cpuUS += e.cpuUS
	if d.cmds == nil {
		d.cmds = map[string]cmdStat{}
	}
	for name, c := range e.cmds {
		s := d.cmds[name]
		d.cmds[name] = cmdStat{Calls: s.Calls + c.Calls, Usec: s.Usec + c.Usec}
	}
}

// infoFields parses an INFO answer into its "name:value" lines.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// deleteNamespace deletes every key under ns ("<ns>:*").
func (r *runner) deleteNamespace(ctx context.Context, ns string) error {
	match := globEscape(ns) + ":*"
	var cursor uint64
	for {
		keys, next, err := r.admin.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return fmt.Errorf("delete %s: %w", ns, err)
		}
		if len(keys) > 0 {
			if err := r.admin.Del(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("delete %s: %w", ns, err)
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// globEscape escapes the SCAN MATCH metacharacters of s.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// oneLine is err's text on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
