package datacodec

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
)

type Deep struct {
	ByName  map[string]int
	ByID    map[int64]string
	Nested  map[string]map[string]int
	Structs map[string]Gear
	Any     map[string]any
	Keyless map[any]int
	Ptrs    map[uint8]*Gear
}

func deepValue() Deep {
	return Deep{
		ByName:  map[string]int{"b": 2, "a": 1, "c": 3, "aa": 4, "": 5, "B": 6},
		ByID:    map[int64]string{-5: "m", 3: "c", 100000: "big", -1 << 40: "neg", 0: "z"},
		Nested:  map[string]map[string]int{"x": {"q": 1, "p": 2}, "w": {"z": 3, "y": 4}},
		Structs: map[string]Gear{"s2": {Level: 2, Sockets: map[string]string{"n": "1", "m": "2"}}, "s1": {Level: 1}},
		Any:     map[string]any{"k": map[string]any{"b": 1, "a": []any{map[string]any{"y": 1, "x": 2}}}, "j": 1.5},
		Keyless: map[any]int{"s": 1, int64(2): 2, true: 3, 1.5: 4},
		Ptrs:    map[uint8]*Gear{2: {Level: 2}, 1: nil, 3: {Durability: 3}},
	}
}

// TestEncodeIsDeterministic: the same value gives the same bytes every
// time (Go's map order is random), maps sorted at every depth, unknown
// fields included.
func TestEncodeIsDeterministic(t *testing.T) {
	c := mustNew(t, Deep{}, Options{})
	v := deepValue()
	first := mustEncode(t, c, v, nil)
	for range 50 {
		if b := mustEncode(t, c, v, nil); !bytes.Equal(b, first) {
			t.Fatalf("two encodings differ:\n%x\n%x", first, b)
		}
	}

	// Unknown fields whose maps a foreign writer left unsorted.
	c1 := mustNew(t, PlayerV1{}, Options{})
	unsorted := []byte{0x82, 0xa5, 'C', 'o', 'i', 'n', 's', 0x05, 0xa5, 'E', 'x', 't', 'r', 'a',
		0x83, 0xa1, 'z', 0x01, 0xa1, 'a', 0x81, 0xa1, 'y', 0x01, 0xa1, 'm', 0x02}
	p, unk, err := c1.Decode(unsorted, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := mustEncode(t, c1, p, unk)
	var extra map[string]any
	var back struct{ Extra msgpack.RawMessage }
	if err := msgpack.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	want := []byte{0x83, 0xa1, 'a', 0x81, 0xa1, 'y', 0x01, 0xa1, 'm', 0x02, 0xa1, 'z', 0x01}
	if !bytes.Equal(back.Extra, want) {
		t.Fatalf("unknown map not sorted: %x, want %x", []byte(back.Extra), want)
	}
	if err := msgpack.Unmarshal(back.Extra, &extra); err != nil || len(extra) != 3 {
		t.Fatal(extra, err)
	}
}

// TestCanonicalKeyOrder: keys sort by value (numbers numerically, strings
// bytewise), the same for typed maps and for maps kept as unknown fields.
func TestCanonicalKeyOrder(t *testing.T) {
	c := mustNew(t, Deep{}, Options{})
	b := mustEncode(t, c, Deep{ByID: map[int64]string{10: "", -3: "", 2: "", -100: ""}, ByName: map[string]int{"b": 0, "a": 0, "ab": 0, "B": 0}}, nil)
	var got struct {
		ByName msgpack.RawMessage
		ByID   msgpack.RawMessage
	}
	if err := msgpack.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for r := (msgpackwire.Reader{B: got.ByID, Off: 1}); r.Left() > 0; {
		c, _ := r.Code()
		u, _, _ := r.Integer(c, "")
		ids = append(ids, int64(u))
		r.Skip()
	}
	if want := []int64{-100, -3, 2, 10}; !equalInts(ids, want) {
		t.Fatalf("int keys in order %v, want %v", ids, want)
	}
	if want := "\x84\xa1B\x00\xa1a\x00\xa2ab\x00\xa1b\x00"; string(got.ByName) != want {
		t.Fatalf("string keys: %q, want %q", got.ByName, want)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReencodeIsByteIdentical: decoding and encoding again what this codec
// wrote gives the same bytes, with and without unknown fields, so an
// unchanged profile is never rewritten.
func TestReencodeIsByteIdentical(t *testing.T) {
	c1 := mustNew(t, PlayerV1{Inventory: map[string]ItemV1{}}, Options{})
	c2 := mustNew(t, PlayerV2{}, Options{})
	cd := mustNew(t, Deep{}, Options{})
	tests := []struct {
		name   string
		stored func(t *testing.T) []byte
		again  func(t *testing.T, b []byte) []byte
	}{
		{"own record", func(t *testing.T) []byte { return mustEncode(t, c2, newPlayerV2(), nil) },
			func(t *testing.T, b []byte) []byte { return roundTrip(t, c2, b) }},
		{"maps at every depth", func(t *testing.T) []byte { return mustEncode(t, cd, deepValue(), nil) },
			func(t *testing.T, b []byte) []byte { return roundTrip(t, cd, b) }},
		{"older server's write of a newer record (unknown fields)",
			func(t *testing.T) []byte { return roundTrip(t, c1, mustEncode(t, c2, newPlayerV2(), nil)) },
			func(t *testing.T, b []byte) []byte { return roundTrip(t, c1, b) }},
		{"defaults", func(t *testing.T) []byte { return roundTrip(t, c1, nil) },
			func(t *testing.T, b []byte) []byte { return roundTrip(t, c1, b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.stored(t)
			if again := tt.again(t, b); !bytes.Equal(again, b) {
				t.Fatalf("decode -> encode changed the bytes:\n%x\n%x", b, again)
			}
		})
	}
}

func roundTrip[T any](tb testing.TB, c *Codec[T], b []byte) []byte {
	tb.Helper()
	v, unk, err := c.Decode(b, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return mustEncode(tb, c, v, unk)
}

type Sized struct {
	I   int
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	U   uint
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
	F32 float32
	F64 float64
	S   string
	B   []byte
	BA  [3]byte
	Arr [2]int
	Sl  []int16
	T   time.Time
	P   *int
	Any any
	Big string
	One map[string]int
}

type Tagged struct {
	Base
	Name   string `json:"name"`
	Skip   int    `json:"-"`
	Both   int    `msgpack:"m" json:"j"`
	Empty  string `json:"empty,omitempty"`
	hidden int
}

type Base struct {
	ID   int `json:"id"`
	Kind string
}

// TestEncodeMatchesMsgpack: without maps of two entries or more (and
// sized integers inside an any), the bytes are those of msgpack.Marshal
// with the same tag, so a plain msgpack decoder reads them and nothing
// changes on the wire.
func TestEncodeMatchesMsgpack(t *testing.T) {
	seven := 7
	sized := Sized{
		I: -1 << 40, I8: -5, I16: 300, I32: -70000, I64: 1, U: 1 << 33, U8: 200, U16: 60000, U32: 1 << 31, U64: math.MaxUint64,
		F32: 1.5, F64: -2.25, S: "héllo", B: []byte{1, 2}, BA: [3]byte{9, 8, 7}, Arr: [2]int{1, -1}, Sl: []int16{3},
		T: time.Unix(1700000000, 5).UTC(), P: &seven, Any: []any{"x", 1, map[string]any{"k": 2}}, Big: string(bytes.Repeat([]byte("x"), 300)),
		One: map[string]int{"only": 1},
	}
	tests := []struct {
		name string
		tag  string
		v    any
		enc  func(*testing.T) []byte
	}{
		{"sized numbers, strings, bytes, arrays, time", "", sized, func(t *testing.T) []byte {
			return mustEncode(t, mustNew(t, Sized{}, Options{}), sized, nil)
		}},
		{"zero value", "", Sized{}, func(t *testing.T) []byte { return mustEncode(t, mustNew(t, Sized{}, Options{}), Sized{}, nil) }},
		{"msgpack tags", "", Tagged{Base: Base{ID: 1, Kind: "k"}, Name: "n", Skip: 2, Both: 3, hidden: 4}, func(t *testing.T) []byte {
			return mustEncode(t, mustNew(t, Tagged{}, Options{}), Tagged{Base: Base{ID: 1, Kind: "k"}, Name: "n", Skip: 2, Both: 3, hidden: 4}, nil)
		}},
		{"json tags", "json", Tagged{Base: Base{ID: 1, Kind: "k"}, Name: "n", Skip: 2, Both: 3, Empty: "e"}, func(t *testing.T) []byte {
			return mustEncode(t, mustNew(t, Tagged{}, Options{TagName: "json"}), Tagged{Base: Base{ID: 1, Kind: "k"}, Name: "n", Skip: 2, Both: 3, Empty: "e"}, nil)
		}},
		{"rolling-deploy types", "", newPlayerV2(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.enc == nil {
				v := PlayerV2{Coins: 1, Pet: &PetV2{Name: "a"}, Quests: []QuestV2{{ID: "q"}}, Inventory: map[string]ItemV2{"x": {Count: 1}}}
				tt.v = v
				tt.enc = func(t *testing.T) []byte { return mustEncode(t, mustNew(t, PlayerV2{}, Options{}), v, nil) }
			}
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.SetCustomStructTag(tt.tag)
			if err := enc.Encode(tt.v); err != nil {
				t.Fatal(err)
			}
			if got := tt.enc(t); !bytes.Equal(got, buf.Bytes()) {
				t.Fatalf("\n got %x\nwant %x", got, buf.Bytes())
			}
		})
	}
}

// TestTimeMatchesMsgpack: time.Time is written here (not through msgpack,
// to save an allocation), in each of msgpack's three forms.
func TestTimeMatchesMsgpack(t *testing.T) {
	type at struct{ T time.Time }
	c := mustNew(t, at{}, Options{})
	for _, tm := range []time.Time{
		{}, time.Unix(1700000000, 0), time.Unix(1700000000, 999999999).In(time.FixedZone("x", 3600)),
		time.Unix(-1, 5), time.Unix(1<<35, 1), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		want, _ := msgpack.Marshal(&at{tm})
		got := mustEncode(t, c, at{tm}, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("%v:\n got %x\nwant %x", tm, got, want)
		}
		back, _, err := c.Decode(got, 0)
		if err != nil || !back.T.Equal(tm) {
			t.Fatalf("%v: read back %v, %v", tm, back.T, err)
		}
	}
}

// TestReadsRecordsDatadriverWrote: a record written with msgpack.Marshal
// decodes as a top-level merge decodes it, and what the codec writes, that
// merge reads back the same.
func TestReadsRecordsDatadriverWrote(t *testing.T) {
	c := benchCodec(t)
	defaults := benchDefaults()
	db, _ := msgpack.Marshal(&defaults)
	var defaultsMap map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(db, &defaultsMap); err != nil {
		t.Fatal(err)
	}
	full := benchValue()
	partial := map[string]any{"Name": "old", "Coins": 3, "Quests": map[string]any{"q": 1}} // written before the other fields existed
	for name, v := range map[string]any{"full": &full, "partial": partial} {
		t.Run(name, func(t *testing.T) {
			stored, err := msgpack.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want, err := mergeDecode[benchProfile](defaultsMap, stored)
			if err != nil {
				t.Fatal(err)
			}
			got, unk, err := c.Decode(stored, 0)
			if err != nil || unk != nil {
				t.Fatal(err, unk)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("\n got %+v\nwant %+v", got, want)
			}
			var back benchProfile
			if err := msgpack.Unmarshal(mustEncode(t, c, got, nil), &back); err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("msgpack reads back %+v, %v", back, err)
			}
		})
	}
}
