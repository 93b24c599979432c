package tradescript

import (
	"reflect"
	"testing"
	"time"
)

// TestArgumentsReadBack: each script's parser reads back every argument
// its writer wrote, so the writer and the parser never count from
// different bases.
func TestArgumentsReadBack(t *testing.T) {
	b := BeginArgs{Coordinator: "server-a", Retain: time.Hour, Parts: []Part{
		{Desc: Desc{Driver: "PlayerData", Key: "a", Token: "ta", Ver: 3, Schema: 2, SchemaMin: 1}, Image: []byte("image-a")},
		{Desc: Desc{Driver: "Inventory", Key: "b", Token: "tb"}, Image: []byte("image-b")},
	}}
	if got, err := Begin().ParseArgs(Begin().Wire(b)); err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("begin: read back %+v (%v), wrote %+v", got, err, b)
	}
	m := MoveArgs{From: "PREPARED", To: "COMMITTED", Retain: 24 * time.Hour}
	if got, err := Move().ParseArgs(Move().Wire(m)); err != nil || got != m {
		t.Errorf("move: read back %+v (%v), wrote %+v", got, err, m)
	}
	s := SettledArgs{Retain: time.Minute, Idx: []int{0, 2}}
	if got, err := Settled().ParseArgs(Settled().Wire(s)); err != nil || !reflect.DeepEqual(got, s) {
		t.Errorf("settled: read back %+v (%v), wrote %+v", got, err, s)
	}
}

// TestMalformedCallsAreRefused: an observed call that is not what the
// writer writes is an error, never a panic or a half-read value.
func TestMalformedCallsAreRefused(t *testing.T) {
	for _, argv := range [][]string{nil, {"a"}, {"a", "1", "x", "d", "i", "c"}, {"a", "2", "10", "d", "i", "c"},
		{"a", "1", "10", "\xc1", "i", "c"}} {
		if _, err := ParseBeginArgs(argv); err == nil {
			t.Errorf("begin %q: read without an error", argv)
		}
	}
	if _, err := ParseMoveArgs([]string{"PREPARED", "COMMITTED", "soon"}); err == nil {
		t.Error("move with a retention that is not a number: read without an error")
	}
	if _, err := ParseSettledArgs([]string{"10", "x"}); err == nil {
		t.Error("settled with an index that is not a number: read without an error")
	}
	if _, err := Move().Answer([]any{"WHAT"}); err == nil {
		t.Error("an unknown answer: read without an error")
	}
}
