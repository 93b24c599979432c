package tradejournal

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/ckernel/playerdata/internal/damage"
	"github.com/ckernel/playerdata/internal/tradescript"
)

// entryFields is a journal entry of two participants as begin.lua writes it
// from the coordinator's arguments (TestJournalLifecycle reads entries the
// script wrote).
func entryFields(tb testing.TB, state State) map[string]string {
	tb.Helper()
	a := tradescript.BeginArgs{Coordinator: "server-a", Retain: DefaultRetain, Parts: []tradescript.Part{
		{Desc: tradescript.Desc{Driver: "PlayerData", Key: "a", Token: "ta", Ver: 3, Schema: 2, SchemaMin: 1}, Image: []byte("image-a")},
		{Desc: tradescript.Desc{Driver: "Inventory", Key: "b", Token: "tb", Ver: 0}, Image: []byte("image-b")},
	}}
	wire := tradescript.Begin().Wire(a)
	arg := func(i int) string { return wire[i] }
	const at = "1765000000123"
	m := map[string]string{"state": string(state), "coord": arg(0), "at": at, "n": arg(1), "c": arg(len(wire)-1) + "," + at}
	for i := range 2 {
		m["p"+strconv.Itoa(i)], m["img"+strconv.Itoa(i)] = arg(3+2*i), arg(4+2*i)
	}
	if state == Committed {
		m["s0"] = "1"
	}
	return m
}

// checkEntryEdit fails unless m (want's fields, edited) is refused, or
// reads as want does: a trade is never read with another image, another
// participant or another state.
func checkEntryEdit(t *testing.T, m map[string]string, want *Entry, what string) {
	t.Helper()
	got, err := parseEntry("t1", m)
	if err != nil {
		return
	}
	if got.State == Aborted && want.State == Aborted {
		return // an aborted trade's participants matter to nobody
	}
	// A settled mark deleted reads as not settled: the participant is
	// settled again, which finds its record settled and writes nothing (a
	// mark is never invented).
	for i := range min(len(got.Settled), len(want.Settled)) {
		if got.Settled[i] && !want.Settled[i] {
			t.Fatalf("%s: participant %d reads as settled", what, i)
		}
		got.Settled[i] = want.Settled[i]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: read as %+v with no error, want refused or %+v", what, got, want)
	}
}

// The attack of issue 32 on a trade's journal entry: every byte of every
// field flipped (each bit, all bits), each field cut short at every byte,
// extended and deleted. The entry is refused (ErrCorrupt) or reads as
// begun: a settle never writes another image into a profile.
func TestJournalEntryEveryByte(t *testing.T) {
	for _, state := range []State{Prepared, Committed, Aborted} {
		m := entryFields(t, state)
		want, err := parseEntry("t1", m)
		if err != nil {
			t.Fatalf("%s: the entry as begun is refused: %v", state, err)
		}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			damage.Every([]byte(m[name]), func(v []byte, what string) {
				e := maps.Clone(m)
				e[name] = string(v)
				checkEntryEdit(t, e, want, string(state)+" "+name+" "+what)
			})
			e := maps.Clone(m)
			delete(e, name)
			checkEntryEdit(t, e, want, string(state)+" "+name+" deleted")
		}
	}
}

// FuzzJournalEntry edits one field of a journal entry once (flips, sets,
// cuts or extends it at any byte): the entry is refused, or reads as begun.
func FuzzJournalEntry(f *testing.F) {
	for field := range uint8(8) {
		f.Add(field, uint8(0), uint16(0), byte(1))
		f.Add(field, uint8(2), uint16(2), byte(0))
		f.Add(field, uint8(3), uint16(1), byte('1'))
	}
	m := entryFields(f, Committed)
	want, err := parseEntry("t1", m)
	if err != nil {
		f.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(m))
	f.Fuzz(func(t *testing.T, field, op uint8, pos uint16, b byte) {
		name := names[int(field)%len(names)]
		e := maps.Clone(m)
		e[name] = string(damage.Once([]byte(m[name]), op, int(pos), b))
		checkEntryEdit(t, e, want, name+" edited")
	})
}
