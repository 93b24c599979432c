package presencescript

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestArgsRoundTrip: what a call sends parses back to the arguments given.
func TestArgsRoundTrip(t *testing.T) {
	if a, want := mustParse(t, ParseReadArgs, Read.Wire(ReadArgs{JobID: "server-a", TTL: 10 * time.Second})), (ReadArgs{JobID: "server-a", TTL: 10 * time.Second}); a != want {
		t.Errorf("read args %+v, want %+v", a, want)
	}
	if a, want := mustParse(t, ParseRemoveArgs, Remove.Wire(RemoveArgs{Owners: "o", Load: "l", JobID: "server-a", Instance: "i1"})), (RemoveArgs{JobID: "server-a", Instance: "i1"}); a != want {
		t.Errorf("remove args %+v, want %+v", a, want)
	}
	if a, want := mustParse(t, ParseShardsArgs, Shards.Wire(ShardsArgs{Count: 4, Mark: 40 * time.Second})), (ShardsArgs{Count: 4, Mark: 40 * time.Second}); a != want {
		t.Errorf("shards args %+v, want %+v", a, want)
	}
	beat := BeatArgs{JobID: "server-a", TTL: 10 * time.Second, Instance: "i1", Expected: time.UnixMilli(1_900_000_000_123),
		Check: true, WriteSessions: true, Sessions: 7}
	if a := mustParse(t, ParseBeatArgs, Beat.Wire(beat)); a != beat {
		t.Errorf("beat args %+v, want %+v", a, beat)
	}
	// The common beat (no check, no count) sends four arguments.
	common := BeatArgs{JobID: "server-a", TTL: 10 * time.Second, Instance: "i1", Expected: time.UnixMilli(1_900_000_000_123)}
	if wire := Beat.Wire(common); len(wire) != 4 {
		t.Errorf("the common beat sends %q, want four arguments", wire)
	} else if a := mustParse(t, ParseBeatArgs, wire); a != common {
		t.Errorf("common beat args %+v, want %+v", a, common)
	}
	counted := common
	counted.WriteSessions, counted.Sessions = true, 0
	if wire := Beat.Wire(counted); len(wire) != 6 {
		t.Errorf("a beat that carries a count sends %q, want six arguments", wire)
	} else if a := mustParse(t, ParseBeatArgs, wire); a != counted {
		t.Errorf("counted beat args %+v, want %+v", a, counted)
	}
	for name, parse := range map[string]func([]string) error{
		"beat":   func(a []string) error { _, err := ParseBeatArgs(a); return err },
		"read":   func(a []string) error { _, err := ParseReadArgs(a); return err },
		"remove": func(a []string) error { _, err := ParseRemoveArgs(a); return err },
		"shards": func(a []string) error { _, err := ParseShardsArgs(a); return err },
	} {
		if err := parse([]string{"x"}); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("%s of one argument: %v, want ErrUnexpectedReply", name, err)
		}
	}
}

func mustParse[A any](t *testing.T, parse func([]string) (A, error), wire []string) A {
	t.Helper()
	a, err := parse(wire)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAnswers(t *testing.T) {
	now := time.UnixMilli(1765000000123)
	for _, tc := range []struct {
		v    any
		want ReadAnswer
	}{
		{[]any{int64(1), int64(7000), now.UnixMilli()}, ReadAnswer{ReadAlive, 7 * time.Second, now}},
		{[]any{int64(2), int64(-1), now.UnixMilli()}, ReadAnswer{ReadStopped, -time.Millisecond, now}},
		{[]any{int64(0), int64(3000), now.UnixMilli()}, ReadAnswer{ReadUnknown, 3 * time.Second, now}},
	} {
		got, err := ParseReadAnswer(tc.v)
		if err != nil || !got.Now.Equal(tc.want.Now) || got.Outcome != tc.want.Outcome || got.Left != tc.want.Left {
			t.Errorf("read answer %v = %+v, %v; want %+v", tc.v, got, err, tc.want)
		}
	}
	for _, bad := range []any{int64(1), []any{int64(1), int64(2)}, []any{int64(3), int64(0), int64(0)}, []any{"1", int64(0), int64(0)}} {
		if _, err := ParseReadAnswer(bad); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("read answer %v: %v, want ErrUnexpectedReply", bad, err)
		}
	}
	got, err := ParseShardsAnswer([]any{now.UnixMilli(), int64(1), int64(5), int64(4), int64(6)})
	if err != nil || !got.Now.Equal(now) || !reflect.DeepEqual(got.Counts, []int{1, 4}) {
		t.Errorf("shards answer = %+v, %v", got, err)
	}
	if _, err := ParseShardsAnswer([]any{now.UnixMilli(), int64(1)}); !errors.Is(err, ErrUnexpectedReply) {
		t.Errorf("shards answer of even length: %v, want ErrUnexpectedReply", err)
	}
	for v, want := range map[any]bool{int64(1): true, int64(0): false} {
		if got, err := parseRemoved(v); err != nil || got != want {
			t.Errorf("remove answer %v = %v, %v", v, got, err)
		}
	}
	if _, err := parseRemoved(int64(2)); !errors.Is(err, ErrUnexpectedReply) {
		t.Errorf("remove answer 2: %v, want ErrUnexpectedReply", err)
	}
}

// The fast path answers {expiresAt, now, load}: a beat written over our
// own, with no reset and no other instance; any other three values are
// ErrUnexpectedReply.
func TestFastBeatAnswer(t *testing.T) {
	got, err := ParseBeatAnswer([]any{int64(1_900_000_010_000), int64(1_900_000_000_000), int64(1)})
	want := BeatAnswer{Outcome: BeatWritten, ExpiresAt: time.UnixMilli(1_900_000_010_000), At: time.UnixMilli(1_900_000_000_000),
		Load: LoadWritten}
	if err != nil || got != want {
		t.Errorf("fast answer = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range [][]any{{int64(1), int64(2), int64(3)}, {int64(0), int64(2), int64(0)}, {int64(1), int64(2), "0"},
		{int64(1), int64(-2), int64(0)}} {
		if _, err := ParseBeatAnswer(bad); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("fast answer %v: %v, want ErrUnexpectedReply", bad, err)
		}
	}
}

// list.lua's arguments parse back, and its answer is read row by row; a
// shape it does not know is ErrUnexpectedReply, never a panic.
func TestListTyped(t *testing.T) {
	if a, want := mustParse(t, ParseListArgs, List.Wire(ListArgs{Owners: "o", Load: "l", TTL: 10 * time.Second})), (ListArgs{TTL: 10 * time.Second}); a != want {
		t.Errorf("list args %+v, want %+v", a, want)
	}
	if _, err := ParseListArgs([]string{"ten"}); !errors.Is(err, ErrUnexpectedReply) {
		t.Errorf("list args [ten]: %v, want ErrUnexpectedReply", err)
	}
	got, err := ParseListAnswer([]any{int64(1), int64(0), "", "server-a", int64(4000), "i1", "3", "server-b", int64(-200), "", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := ListAnswer{Proof: true, Rows: []ListRow{{JobID: "server-a", Left: 4 * time.Second, Instance: "i1", Load: "3"},
		{JobID: "server-b", Left: -200 * time.Millisecond}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("list answer %+v, want %+v", got, want)
	}
	for _, bad := range []any{"x", []any{int64(0)}, []any{int64(2), int64(0), ""}, []any{int64(0), int64(0), "", "a", "b", "c", "d"}} {
		if _, err := ParseListAnswer(bad); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("list answer %v: %v, want ErrUnexpectedReply", bad, err)
		}
	}
}
