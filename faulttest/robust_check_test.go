//go:build linux

package faulttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// history is a run's operations, per key, ready for porcupine.
type history struct {
	keys map[string][]porcupine.Operation
	// counts of what was read: calls, and the operations left out
	// (failed, or acquires and updates that never returned).
	calls, dropped, unknown int
	// lines are the lines it was built from.
	lines []HistLine
	// endedAdoptions are Joins that adopted a retained profile whose Done
	// had closed already, and not by a release (a handoff racing the
	// return is no fault): not a linearizability matter, reported beside it.
	endedAdoptions []string
}

// opMeta is what the visualization shows beside an operation.
type opMeta struct {
	Op, Err string
}

func (m opMeta) String() string {
	if m.Err == "" {
		return m.Op
	}
	return m.Op + ": " + m.Err
}

// readHistories reads every *.jsonl file in dir.
func readHistories(dir string) (history, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return history{}, err
	}
	var lines []HistLine
	for _, f := range files {
		ls, err := readHistoryFile(f)
		if err != nil {
			return history{}, err
		}
		lines = append(lines, ls...)
	}
	return buildHistory(lines), nil
}

// readHistoryFile reads one process's history. A last line cut short (the
// process was killed in its write) is dropped; any other bad line is an
// error.
func readHistoryFile(path string) ([]HistLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []HistLine
	var bad error
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if bad != nil {
			return nil, bad
		}
		var l HistLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			bad = fmt.Errorf("%s:%d: %v", path, n, err)
			continue
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// buildHistory pairs calls with returns and turns them into porcupine
// operations, one client per session.
func buildHistory(lines []HistLine) history {
	rets := make(map[string]HistLine)
	for _, l := range lines {
		if l.Ret {
			rets[l.Op] = l
		}
	}
	h := history{keys: make(map[string][]porcupine.Operation), lines: lines}
	clients := make(map[string]map[string]int) // key → session → client id
	for _, c := range lines {
		if c.Ret {
			continue
		}
		h.calls++
		r, returned := rets[c.Op]
		in := opIn{Key: c.Key, Kind: c.Kind, Sess: c.Sess}
		op := porcupine.Operation{Call: c.T, Return: r.T, Metadata: opMeta{Op: c.Op, Err: r.Err}}
		switch c.Kind {
		case KindAcquire, KindUpdate:
			if !returned || r.Out != OutOK {
				h.dropped++
				continue
			}
			if c.Kind == KindAcquire {
				in.Sess, in.Adopt = r.Sess, r.Adopt
				if r.Ended && r.Adopt {
					h.endedAdoptions = append(h.endedAdoptions, fmt.Sprintf("%s on %s (session %s, adopt %v, data %v): %s",
						c.Op, c.Key, r.Sess, r.Adopt, deref(r.V), r.Err))
				}
				op.Output = opOut{V: deref(r.V)}
			} else {
				in.From, in.V = deref(r.From), deref(r.V)
				op.Output = opOut{}
			}
		default: // writes
			in.V = deref(c.V)
			op.Output = opOut{}
			switch {
			case returned && r.Out == OutFail:
				h.dropped++
				continue
			case !returned || r.Out == OutUnknown:
				in.Unknown = true
				op.Return = unknownReturn
				h.unknown++
			}
		}
		op.Input = in
		cs := clients[c.Key]
		if cs == nil {
			cs = make(map[string]int)
			clients[c.Key] = cs
		}
		id, ok := cs[in.Sess]
		if !ok {
			id = len(cs)
			cs[in.Sess] = id
		}
		op.ClientId = id
		h.keys[c.Key] = append(h.keys[c.Key], op)
	}
	return h
}

func deref(r *Register) Register {
	if r == nil {
		return Register{}
	}
	return *r
}

// ops is how many operations the history holds, over every key.
func (h history) ops() int {
	n := 0
	for _, ops := range h.keys {
		n += len(ops)
	}
	return n
}

// okBetween counts operations that returned, with effect, in [from, to]
// (CLOCK_MONOTONIC ns).
func (h history) okBetween(from, to int64) int {
	n := 0
	for _, ops := range h.keys {
		for _, op := range ops {
			if op.Return != unknownReturn && op.Return >= from && op.Return <= to {
				n++
			}
		}
	}
	return n
}

// failedUpdatesKept lists the Updates that returned an error after their
// function ran and whose change a write or a load carried all the same
// (issue 19: "an Update that returns an error has changed nothing that any
// server will load").
func (h history) failedUpdatesKept() []string {
	failed := make(map[Register]HistLine) // the value a failed Update made → its call
	calls := make(map[string]HistLine)
	for _, l := range h.lines {
		if !l.Ret {
			calls[l.Op] = l
		}
	}
	for _, l := range h.lines {
		if l.Ret && l.Out == OutFail && l.V != nil && calls[l.Op].Kind == KindUpdate {
			failed[*l.V] = calls[l.Op]
		}
	}
	var out []string
	seen := make(map[Register]bool)
	for _, l := range h.lines {
		if l.V == nil || seen[*l.V] {
			continue
		}
		c, ok := failed[*l.V]
		kind := l.Kind
		if l.Ret {
			kind = calls[l.Op].Kind
		}
		if ok && l.Op != c.Op && (kind == KindAcquire || kind == KindSave || kind == KindRelease || kind == KindLibRelease ||
			kind == KindMove) {
			seen[*l.V] = true
			out = append(out, fmt.Sprintf("update %s on %s (session %s) failed, yet %s %s carried its value %v", c.Op, c.Key, c.Sess, kind, l.Op, *l.V))
		}
	}
	return out
}

// verdict is porcupine's answer for a whole history.
type verdict struct {
	result  porcupine.CheckResult // Illegal if any key is, else Unknown if any key is
	took    time.Duration
	illegal []keyVerdict
	unknown []string // keys whose check ran out of time
}

// keyVerdict is an illegal key: the visualization data and the operations
// porcupine could not place after its longest legal prefix.
type keyVerdict struct {
	key    string
	info   porcupine.LinearizationInfo
	stuck  []porcupine.Operation
	prefix []porcupine.Operation // the last operations of the longest legal prefix
}

// check checks every key of h in parallel, each within limit.
func check(h history, limit time.Duration) verdict {
	start := time.Now()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range h.keys {
			if !yield(k) {
				return
			}
		}
	})
	type res struct {
		r    porcupine.CheckResult
		info porcupine.LinearizationInfo
	}
	results := make([]res, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			r, info := porcupine.CheckOperationsVerbose(regModel, h.keys[k], limit)
			results[i] = res{r, info}
		})
	}
	wg.Wait()
	v := verdict{result: porcupine.Ok, took: time.Since(start)}
	for i, k := range keys {
		switch results[i].r {
		case porcupine.Illegal:
			v.result = porcupine.Illegal
			v.illegal = append(v.illegal, explain(k, h.keys[k], results[i].info))
		case porcupine.Unknown:
			if v.result == porcupine.Ok {
				v.result = porcupine.Unknown
			}
			v.unknown = append(v.unknown, k)
		}
	}
	return v
}

// explain finds, in an illegal key's history, the longest legal prefix
// porcupine found and the operations it could not place after it: those
// that had been called before the earliest return left over.
func explain(key string, ops []porcupine.Operation, info porcupine.LinearizationInfo) keyVerdict {
	kv := keyVerdict{key: key, info: info}
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	placed := make(map[string]bool, len(best))
	for _, op := range best {
		placed[op.Metadata.(opMeta).Op] = true
	}
	kv.prefix = best[max(0, len(best)-5):]
	var rest []porcupine.Operation
	firstReturn := int64(unknownReturn)
	for _, op := range ops {
		if !placed[op.Metadata.(opMeta).Op] {
			rest = append(rest, op)
			firstReturn = min(firstReturn, op.Return)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
	for _, op := range rest {
		if op.Call <= firstReturn && len(kv.stuck) < 8 {
			kv.stuck = append(kv.stuck, op)
		}
	}
	return kv
}

// String names the key and the operations of the failure.
func (kv keyVerdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: no legal order explains its history.\n  last operations of the longest legal prefix:\n", kv.key)
	for _, op := range kv.prefix {
		fmt.Fprintf(&b, "    %s\n", opLine(op))
	}
	b.WriteString("  operations that cannot come next:\n")
	for _, op := range kv.stuck {
		fmt.Fprintf(&b, "    %s\n", opLine(op))
	}
	return b.String()
}

// opLine is one operation with its id and times (ms on CLOCK_MONOTONIC).
func opLine(op porcupine.Operation) string {
	ret := "never returned"
	if op.Return != unknownReturn {
		ret = fmt.Sprintf("%.3f", float64(op.Return)/1e6)
	}
	return fmt.Sprintf("[%.3f, %s ms] %s  (%v)", float64(op.Call)/1e6, ret, describeOp(op.Input, op.Output), op.Metadata)
}

// writeFailure writes, for each illegal key, porcupine's visualization,
// and copies the raw histories, into dir; it returns the files written.
func writeFailure(dir, histDir string, v verdict) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, kv := range v.illegal {
		path := filepath.Join(dir, "visualization-"+strings.ReplaceAll(kv.key, ":", "_")+".html")
		if err := porcupine.VisualizePath(regModel, kv.info, path); err != nil {
			return files, err
		}
		files = append(files, path)
		if err := os.WriteFile(filepath.Join(dir, "explain-"+strings.ReplaceAll(kv.key, ":", "_")+".txt"), []byte(kv.String()), 0o644); err != nil {
			return files, err
		}
	}
	if histDir != dir {
		if err := os.CopyFS(filepath.Join(dir, "histories"), os.DirFS(histDir)); err != nil {
			return files, err
		}
	}
	return files, nil
}
