//go:build linux

package faulttest

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/anishathalye/porcupine"
)

// The model the histories are checked against, per key: a register of
// (owning session, stored value), plus the owner's data in memory.
//
//   - acquire(s) returns the stored value and makes s the owner, its data
//     that value; an adopting rejoin (the same session going on with a
//     retained profile) is legal only while s owns the key and returns
//     its data;
//   - update(s, from → to) is legal only while s owns the key and its data
//     is from: this is what catches a profile live on two servers, and a
//     change the library kept although the Update that made it failed;
//   - save(s, v) and release(s, v) write v only while s owns the key and v
//     is its data; a release clears the owner; a move (MoveTo) is a
//     release of v to the server it names: s owns the key no more, the
//     record holds v, and the target's Join acquires it;
//   - free (an operator's unlock or repair --force that freed the lock)
//     ends the owner, whoever it is: the stored value stays, and a later
//     Update by the session that owned the key is illegal;
//   - an operation of unknown outcome may take effect at any point after
//     its call, or never (its return is at infinity).
//
// Failed operations are left out: their error says they changed nothing,
// which the model holds them to.
type regState struct {
	Owner  string   // the owning session, "" when free
	Stored Register // the value in the record
	Mem    Register // the owner's data
}

// opIn is an operation's input: what the caller asked, and, for a write,
// the value it wrote.
type opIn struct {
	Key     string
	Kind    string
	Sess    string
	V       Register // save, release: the value; update: the value after
	From    Register // update: the value before
	Adopt   bool     // acquire: a rejoin adopted the session's retained profile
	Unknown bool     // the outcome is unknown
}

// opOut is an operation's output: the value an acquire returned.
type opOut struct {
	V Register
}

// unknownReturn is the return time of an operation whose outcome is
// unknown: after everything, so it may take effect at any point after its
// call, or (placed last) never.
const unknownReturn = math.MaxInt64

// stepReg is the model's step function.
func stepReg(state, input, output any) (bool, any) {
	st, in := state.(regState), input.(opIn)
	owns := st.Owner == in.Sess
	switch in.Kind {
	case KindAcquire:
		out := output.(opOut)
		if in.Adopt {
			return owns && out.V == st.Mem, st
		}
		if out.V != st.Stored {
			return false, st
		}
		return true, regState{Owner: in.Sess, Stored: st.Stored, Mem: st.Stored}
	case KindUpdate:
		if !owns || in.From != st.Mem {
			return false, st
		}
		st.Mem = in.V
		return true, st
	case KindFree:
		return true, regState{Stored: st.Stored}
	case KindSave, KindRelease, KindLibRelease, KindMove:
		if !owns || in.V != st.Mem {
			// A write of unknown outcome by a session that does not own the
			// key was refused by the fence: legal, and it changes nothing.
			return in.Unknown, st
		}
		st.Stored = in.V
		if in.Kind != KindSave {
			st = regState{Stored: in.V}
		}
		return true, st
	}
	panic(fmt.Sprintf("faulttest: unknown operation kind %q", in.Kind))
}

// regModel is the model of one key's history.
var regModel = porcupine.Model{
	Init:  func() any { return regState{} },
	Step:  stepReg,
	Equal: func(a, b any) bool { return a.(regState) == b.(regState) },
	Hash: func(s any) uint64 {
		st := s.(regState)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\x00%s", st.Owner, st.Stored.N, st.Stored.Op, st.Mem.N, st.Mem.Op)
		return h.Sum64()
	},
	DescribeOperation: describeOp,
	DescribeState: func(s any) string {
		st := s.(regState)
		owner := st.Owner
		if owner == "" {
			owner = "free"
		}
		return fmt.Sprintf("owner %s, stored %v, data %v", owner, st.Stored, st.Mem)
	},
	DescribeOperationMetadata: func(m any) string {
		if m == nil {
			return ""
		}
		return fmt.Sprint(m)
	},
}

// describeOp is an operation as the visualization and the failure report
// show it.
func describeOp(input, output any) string {
	in := input.(opIn)
	q := ""
	if in.Unknown {
		q = " (outcome unknown)"
	}
	switch in.Kind {
	case KindAcquire:
		verb := "acquire"
		if in.Adopt {
			verb = "adopt"
		}
		return fmt.Sprintf("%s(%s) → %v", verb, in.Sess, output.(opOut).V)
	case KindUpdate:
		return fmt.Sprintf("update(%s) %v → %v", in.Sess, in.From, in.V)
	case KindFree:
		return "free(" + in.Sess + ")" + q
	}
	return fmt.Sprintf("%s(%s, %v)%s", in.Kind, in.Sess, in.V, q)
}
