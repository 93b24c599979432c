//go:build linux

package faulttest

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// fixtureDir holds histories recorded from a real run (three servers,
// SIGSTOP of one), trimmed to two keys and the first seconds, and an
// operator's free of each key after its last operation (operator.jsonl,
// written by hand: the recorded run had no operator).
const fixtureDir = "testdata/robust"

// TestModelRules: each rule of the model on its own.
func TestModelRules(t *testing.T) {
	v1, v2 := Register{N: 1, Op: "u1"}, Register{N: 2, Op: "u2"}
	owned := regState{Owner: "a.1", Stored: v1, Mem: v1}
	for _, tc := range []struct {
		name  string
		state regState
		in    opIn
		out   opOut
		legal bool
		next  regState
	}{
		{"acquire returns the stored value", regState{Stored: v1}, opIn{Kind: KindAcquire, Sess: "b.1"}, opOut{V: v1}, true, regState{Owner: "b.1", Stored: v1, Mem: v1}},
		{"acquire of another's lock (a handoff or a proven crash)", owned, opIn{Kind: KindAcquire, Sess: "b.1"}, opOut{V: v1}, true, regState{Owner: "b.1", Stored: v1, Mem: v1}},
		{"acquire returning another value", regState{Stored: v1}, opIn{Kind: KindAcquire, Sess: "b.1"}, opOut{V: v2}, false, regState{}},
		{"adopt by the owner returns its data", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindAcquire, Sess: "a.1", Adopt: true}, opOut{V: v2}, true, regState{Owner: "a.1", Stored: v1, Mem: v2}},
		{"adopt by a session that lost the key", regState{Owner: "b.1", Stored: v1, Mem: v1}, opIn{Kind: KindAcquire, Sess: "a.1", Adopt: true}, opOut{V: v1}, false, regState{}},
		{"update by the owner", owned, opIn{Kind: KindUpdate, Sess: "a.1", From: v1, V: v2}, opOut{}, true, regState{Owner: "a.1", Stored: v1, Mem: v2}},
		{"update by a former owner (live on two servers)", owned, opIn{Kind: KindUpdate, Sess: "b.1", From: v1, V: v2}, opOut{}, false, regState{}},
		{"update from data the owner does not have", owned, opIn{Kind: KindUpdate, Sess: "a.1", From: v2, V: v2}, opOut{}, false, regState{}},
		{"save by the owner", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindSave, Sess: "a.1", V: v2}, opOut{}, true, regState{Owner: "a.1", Stored: v2, Mem: v2}},
		{"save acknowledged to a former owner", regState{Owner: "b.1", Stored: v1, Mem: v1}, opIn{Kind: KindSave, Sess: "a.1", V: v2}, opOut{}, false, regState{}},
		{"save of unknown outcome by a former owner: refused, legal", regState{Owner: "b.1", Stored: v1, Mem: v1}, opIn{Kind: KindSave, Sess: "a.1", V: v2, Unknown: true}, opOut{}, true, regState{Owner: "b.1", Stored: v1, Mem: v1}},
		{"release clears the owner", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindRelease, Sess: "a.1", V: v2}, opOut{}, true, regState{Stored: v2}},
		{"library release writes the owner's data", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindLibRelease, Sess: "a.1", V: v2}, opOut{}, true, regState{Stored: v2}},
		{"move hands the owner's data on", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindMove, Sess: "a.1", V: v2}, opOut{}, true, regState{Stored: v2}},
		{"move by a former owner", regState{Owner: "b.1", Stored: v1, Mem: v1}, opIn{Kind: KindMove, Sess: "a.1", V: v2}, opOut{}, false, regState{}},
		{"release of data the owner does not have", regState{Owner: "a.1", Stored: v1, Mem: v1}, opIn{Kind: KindRelease, Sess: "a.1", V: v2}, opOut{}, false, regState{}},
		{"an operator's free ends the owner", regState{Owner: "a.1", Stored: v1, Mem: v2}, opIn{Kind: KindFree, Sess: "operator"}, opOut{}, true, regState{Stored: v1}},
		{"update by the owner of a freed lock", regState{Stored: v1}, opIn{Kind: KindUpdate, Sess: "a.1", From: v1, V: v2}, opOut{}, false, regState{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legal, next := stepReg(tc.state, tc.in, tc.out)
			if legal != tc.legal {
				t.Fatalf("legal = %v, want %v", legal, tc.legal)
			}
			if legal && next.(regState) != tc.next {
				t.Errorf("next state %+v, want %+v", next, tc.next)
			}
		})
	}
}

// TestCheckerFindsMutations: the recorded fixture is linearizable, and
// each mutation of it (one change each) is found illegal.
func TestCheckerFindsMutations(t *testing.T) {
	h, err := readHistories(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	if h.ops() < 200 {
		t.Fatalf("fixture holds %d operations; want a real history", h.ops())
	}
	if v := check(h, time.Minute); v.result != porcupine.Ok {
		t.Fatalf("the recorded fixture is %v: %v", v.result, v.illegal)
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			caught, applied := mutationsCaught(h, m)
			if applied == 0 {
				t.Fatal("no key of the fixture has a place for this mutation")
			}
			if caught != applied {
				t.Errorf("checker found %d of %d mutated keys illegal", caught, applied)
			}
		})
	}
}

// mutationsCaught applies m to every key of h it fits and counts the
// mutated histories porcupine finds illegal.
func mutationsCaught(h history, m mutation) (caught, applied int) {
	for _, ops := range h.keys {
		mutated, ok := m.apply(ops)
		if !ok {
			continue
		}
		applied++
		if porcupine.CheckOperationsTimeout(regModel, mutated, time.Minute) == porcupine.Illegal {
			caught++
		}
	}
	return caught, applied
}
