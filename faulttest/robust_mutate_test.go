//go:build linux

package faulttest

import (
	"slices"

	"github.com/anishathalye/porcupine"
)

// A mutation changes one thing in a key's recorded history, as a library
// bug would have changed what was seen; it reports false when the history
// has no place for it. The checker must find every mutated history
// illegal.
type mutation struct {
	name  string
	apply func(ops []porcupine.Operation) ([]porcupine.Operation, bool)
}

// mutations are the four the suite asks of the checker.
var mutations = []mutation{
	{"an Update of the old owner moved after the new owner's acquire", moveUpdateAfterAcquire},
	{"an acquire returning an older value", staleAcquire},
	{"an acknowledged save missing (with the release that wrote the same data)", dropAckedSave},
	{"an Update moved after the operator freed its session's lock", moveUpdateAfterFree},
}

func inOf(op porcupine.Operation) opIn { return op.Input.(opIn) }

func returned(op porcupine.Operation) bool { return op.Return != unknownReturn }

// acquires lists the indexes of the acquires (not adoptions) that returned.
func acquires(ops []porcupine.Operation) []int {
	var out []int
	for i, op := range ops {
		if in := inOf(op); in.Kind == KindAcquire && !in.Adopt {
			out = append(out, i)
		}
	}
	return out
}

// moveUpdateAfterAcquire takes an acquire by a session that follows
// another session's accepted Update, and moves that Update to just after
// the acquire returned: the old owner changing a profile another server
// holds.
func moveUpdateAfterAcquire(ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	for _, a := range acquires(ops) {
		if out, ok := moveLastUpdate(ops, ops[a], inOf(ops[a]).Sess); ok {
			return out, true
		}
	}
	return nil, false
}

// moveLastUpdate moves the last accepted Update that returned before op
// began (of another session than not: "" for any) to just after op
// returned.
func moveLastUpdate(ops []porcupine.Operation, op porcupine.Operation, not string) ([]porcupine.Operation, bool) {
	u := -1
	for i, o := range ops {
		in := inOf(o)
		if in.Kind == KindUpdate && (not == "" || in.Sess != not) && returned(o) && o.Return < op.Call &&
			(u < 0 || o.Return > ops[u].Return) {
			u = i
		}
	}
	if u < 0 {
		return nil, false
	}
	out := slices.Clone(ops)
	out[u].Call, out[u].Return = op.Return+1, op.Return+2
	return out, true
}

// staleAcquire makes an acquire return a value written before the one it
// returned.
func staleAcquire(ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	for _, a := range acquires(ops) {
		got := ops[a].Output.(opOut).V
		for _, op := range ops {
			in := inOf(op)
			if in.Kind == KindSave || in.Kind == KindRelease || in.Kind == KindLibRelease || in.Kind == KindMove {
				if returned(op) && op.Return < ops[a].Call && in.V.N < got.N {
					out := slices.Clone(ops)
					out[a].Output = opOut{V: in.V}
					return out, true
				}
			}
		}
	}
	return nil, false
}

// dropAckedSave removes an acknowledged save of a value its session's own
// Update made and another session's acquire later returned, with every
// other write of that value by the same session: the next owner then loads
// data no acknowledged write left.
func dropAckedSave(ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	for i, s := range ops {
		in := inOf(s)
		if in.Kind != KindSave || !returned(s) {
			continue
		}
		made, loaded := false, false
		for _, op := range ops {
			if o := inOf(op); o.Kind == KindUpdate && o.Sess == in.Sess && o.V == in.V {
				made = true
			}
		}
		for _, a := range acquires(ops) {
			if ops[a].Call > s.Return && inOf(ops[a]).Sess != in.Sess && ops[a].Output.(opOut).V == in.V {
				loaded = true
				break
			}
		}
		if !made || !loaded {
			continue
		}
		var out []porcupine.Operation
		for j, op := range ops {
			o := inOf(op)
			writes := o.Kind == KindSave || o.Kind == KindRelease || o.Kind == KindLibRelease || o.Kind == KindMove
			if j == i || (writes && o.Sess == in.Sess && o.V == in.V) {
				continue
			}
			out = append(out, op)
		}
		return out, true
	}
	return nil, false
}

// moveUpdateAfterFree takes a free the operator's verb made (it returned,
// with effect) and moves the last accepted Update before it to just after
// it: a session playing on after its lock was freed.
func moveUpdateAfterFree(ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	for _, f := range ops {
		if inOf(f).Kind != KindFree || !returned(f) {
			continue
		}
		if out, ok := moveLastUpdate(ops, f, ""); ok {
			return out, true
		}
	}
	return nil, false
}
