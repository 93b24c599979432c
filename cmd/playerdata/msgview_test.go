package main

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// mp is the msgpack of v, as a server writes it.
func mp(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestMsgpackJSON(t *testing.T) {
	type item struct {
		Count int
		Tags  []string
	}
	stamp := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"positive fixint", []byte{0x05}, `5`},
		{"negative fixint", []byte{0xff}, `-1`},
		{"int8", []byte{0xd0, 0x80}, `-128`},
		{"int16", []byte{0xd1, 0xff, 0x00}, `-256`},
		{"int64", mp(t, int64(math.MinInt64)), `-9223372036854775808`},
		{"uint64", mp(t, uint64(math.MaxUint64)), `18446744073709551615`},
		{"float32", mp(t, float32(1.5)), `1.5`},
		{"float64", mp(t, 0.1), `0.1`},
		{"NaN", mp(t, math.NaN()), `"NaN"`},
		{"infinity", mp(t, math.Inf(-1)), `"-Inf"`},
		{"nil, true, false", mp(t, []any{nil, true, false}), `[null,true,false]`},
		{"string with quotes and HTML", mp(t, `a "b" <c> & é`), `"a \"b\" <c> & é"`},
		{"long string", mp(t, strings.Repeat("x", 300)), `"` + strings.Repeat("x", 300) + `"`},
		{"bytes as base64", mp(t, []byte{1, 2, 3}), `"AQID"`},
		{"struct keeps field order", mp(t, item{Count: 2, Tags: []string{"a"}}), `{"Count":2,"Tags":["a"]}`},
		{"int keys stringified", mp(t, map[int]string{7: "seven"}), `{"7":"seven"}`},
		{"bool key", []byte{0x81, 0xc3, 0x01}, `{"true":1}`},
		{"array key", []byte{0x81, 0x92, 0x01, 0x02, 0xc0}, `{"[1,2]":null}`},
		{"nested maps", mp(t, map[string]map[string]int{"inv": {"sword": 1}}), `{"inv":{"sword":1}}`},
		{"time", mp(t, stamp), `"2026-03-04T05:06:07.00000089Z"`},
		{"time in seconds", mp(t, time.Unix(1e9, 0)), `"2001-09-09T01:46:40Z"`},
		{"other extension", []byte{0xd4, 0x05, 0xaa}, `{"ext":5,"base64":"qg=="}`},
		{"map16", append([]byte{0xde, 0x00, 0x01}, mp(t, "k")[0], 'k', 0x01), `{"k":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := msgpackJSON(tc.in)
			if err != nil {
				t.Fatalf("msgpackJSON(% x): %v", tc.in, err)
			}
			if string(got) != tc.want || n != len(tc.in) {
				t.Fatalf("msgpackJSON(% x) = %s (%d bytes), want %s (%d bytes)", tc.in, got, n, tc.want, len(tc.in))
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
		})
	}
}

func TestMsgpackJSONCorrupt(t *testing.T) {
	good := mp(t, struct { // a struct keeps its field order: "ada" is last
		Coins int
		Name  string
	}{250, "ada"})
	deep := []byte{}
	for range maxDataDepth + 10 {
		deep = append(deep, 0x91) // an array of one array of one ...
	}
	deep = append(deep, 0x01)
	for _, tc := range []struct {
		name   string
		in     []byte
		offset int
		reason string
	}{
		{"empty", nil, 0, "ends where a value should begin"},
		{"never-used byte", []byte{0x92, 0x01, 0xc1}, 2, "byte 0xc1 begins no msgpack value"},
		{"cut short", good[:len(good)-2], len(good) - 4, "a string needs 3 bytes, only 1 left"},
		{"string longer than the data", []byte{0xd9, 0x20, 'a'}, 0, "a string of 32 claims more than the 1 bytes left"},
		{"map count lies", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, "claims more than the 1 bytes left"},
		{"array count lies", []byte{0x81, 0xa1, 'k', 0xdd, 0x7f, 0xff, 0xff, 0xff}, 3, "claims more than the 0 bytes left"},
		{"too deep", deep, maxDataDepth + 1, "nested deeper than"},
		{"bad timestamp", []byte{0xd5, 0xff, 0x00, 0x00}, 0, "a timestamp of 2 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := msgpackJSON(tc.in)
			var de *dataError
			if !errors.As(err, &de) {
				t.Fatalf("msgpackJSON(% x) = %v, want a *dataError", tc.in, err)
			}
			if de.Offset != tc.offset || !strings.Contains(de.Reason, tc.reason) {
				t.Fatalf("msgpackJSON(% x): %v; want offset %d and %q", tc.in, err, tc.offset, tc.reason)
			}
		})
	}

	t.Run("trailing bytes", func(t *testing.T) {
		in := append(mp(t, 5), 0xc1, 0xc1)
		got, n, err := msgpackJSON(in)
		if err != nil || string(got) != "5" || n != 1 {
			t.Fatalf("msgpackJSON(% x) = %s, %d, %v; want 5 after 1 byte", in, got, n, err)
		}
	})
}

// FuzzMsgpackJSON: any input either decodes to valid JSON or fails with a
// *dataError inside the input, and never panics.
func FuzzMsgpackJSON(f *testing.F) {
	f.Add(mp(f, map[string]any{"Coins": 1, "Items": map[string]int{"a": 1}, "At": time.Unix(5, 6)}))
	f.Add(mp(f, map[int][]byte{1: {2}}))
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc7, 0x0c, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, n, err := msgpackJSON(in)
		var de *dataError
		switch {
		case errors.As(err, &de):
			if de.Offset < 0 || de.Offset > len(in) {
				t.Fatalf("offset %d outside %d bytes", de.Offset, len(in))
			}
		case err != nil:
			t.Fatalf("error %v is not a *dataError", err)
		case !json.Valid(got):
			t.Fatalf("not valid JSON: %s", got)
		case n < 1 || n > len(in):
			t.Fatalf("took %d of %d bytes", n, len(in))
		}
	})
}
