package datacodec

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

type Inner struct {
	A int
	B string
}

type Shadow struct {
	A int
	C int
}

type AutoInline struct {
	Inner
	X int
}

type NotInlinedWhenShadowed struct {
	A int
	Shadow
}

type ExplicitInline struct {
	A      int
	Shadow `msgpack:",inline"`
}

type NoInline struct {
	Inner `msgpack:",noinline"`
	X     int
}

type PtrInline struct {
	*Inner
	X int
}

type Aliased struct {
	Name string `msgpack:"name,alias:Nick"`
}

type StructOmitEmpty struct {
	//lint:ignore U1000 msgpack reads the struct's options from this field
	_msgpack struct{} `msgpack:",omitempty"`
	A        int
	B        string
	P        *Inner
}

type JSONNamed struct {
	Inner `json:"inner"`
	Name  string `json:"name,omitempty"`
	Wins  int    `msgpack:"w" json:"wins"`
	Skip  int    `json:"-"`
}

// TestFieldNamesFollowMsgpack: for each tag rule, the codec writes what
// msgpack writes, reads what msgpack writes as msgpack reads it, and finds
// nothing unknown in it.
func TestFieldNamesFollowMsgpack(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"embedded struct is inlined", sameAsMsgpack(AutoInline{Inner: Inner{A: 1, B: "b"}, X: 2}, "")},
		{"embedded struct with a taken name stays nested", sameAsMsgpack(NotInlinedWhenShadowed{A: 1, Shadow: Shadow{A: 2, C: 3}}, "")},
		{"inline option skips taken names", sameAsMsgpack(ExplicitInline{A: 1, Shadow: Shadow{A: 2, C: 3}}, "")},
		{"noinline", sameAsMsgpack(NoInline{Inner: Inner{A: 1}, X: 2}, "")},
		{"embedded pointer", sameAsMsgpack(PtrInline{Inner: &Inner{A: 1, B: "b"}, X: 2}, "")},
		{"embedded nil pointer: written as msgpack does, read back nil", func(t *testing.T) {
			// msgpack allocates the pointer to store the nils; the codec
			// leaves it nil, so the record encodes to the same bytes again.
			c := mustNew(t, PtrInline{}, Options{})
			b := mustEncode(t, c, PtrInline{X: 2}, nil)
			want, _ := msgpack.Marshal(&PtrInline{X: 2})
			if !bytes.Equal(b, want) {
				t.Fatalf("encoding\n got %x\nwant %x (msgpack)", b, want)
			}
			got, unk, err := c.Decode(b, 0)
			if err != nil || unk != nil || got.Inner != nil || got.X != 2 {
				t.Fatalf("got %+v, %v, %v", got, unk, err)
			}
		}},
		{"alias", sameAsMsgpack(Aliased{Name: "n"}, "")},
		{"struct-wide omitempty, empty", sameAsMsgpack(StructOmitEmpty{}, "")},
		{"struct-wide omitempty, set", sameAsMsgpack(StructOmitEmpty{A: 1, P: &Inner{}}, "")},
		{"json tags", sameAsMsgpack(JSONNamed{Inner: Inner{A: 1}, Name: "n", Wins: 3, Skip: 4}, "json")},
		{"json tags, omitempty", sameAsMsgpack(JSONNamed{Wins: 3}, "json")},
		{"alias reads the other name", func(t *testing.T) {
			c := mustNew(t, Aliased{}, Options{})
			got, unk, err := c.Decode(marshal(t, map[string]any{"Nick": "x"}), 0)
			if err != nil || unk != nil || got.Name != "x" {
				t.Fatalf("got %+v, %v, %v", got, unk, err)
			}
		}},
		{"an inlined struct's own name reads it whole", func(t *testing.T) {
			c := mustNew(t, AutoInline{}, Options{})
			got, unk, err := c.Decode(marshal(t, map[string]any{"Inner": map[string]any{"A": 5}, "X": 1}), 0)
			if want := (AutoInline{Inner: Inner{A: 5}, X: 1}); err != nil || unk != nil || got != want {
				t.Fatalf("got %+v, %v, %v", got, unk, err)
			}
		}},
		{"msgpack tag wins over json", func(t *testing.T) {
			c := mustNew(t, JSONNamed{}, Options{TagName: "json"})
			got, unk, err := c.Decode(marshal(t, map[string]any{"w": 1, "wins": 2, "name": "n", "Skip": 3}), 0)
			if err != nil || got.Wins != 1 || got.Name != "n" || got.Skip != 0 {
				t.Fatalf("got %+v, %v", got, err)
			}
			if paths := unk.Paths(); len(paths) != 2 || paths[0] != "Skip" || paths[1] != "wins" {
				t.Fatalf("unknown %q, want Skip and wins", paths)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

func sameAsMsgpack[T any](v T, tag string) func(t *testing.T) {
	return func(t *testing.T) {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetCustomStructTag(tag)
		if err := enc.Encode(&v); err != nil {
			t.Fatal(err)
		}
		c := mustNew(t, *new(T), Options{TagName: tag})
		if got := mustEncode(t, c, v, nil); !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("encoding\n got %x\nwant %x (msgpack)", got, buf.Bytes())
		}
		var want T
		dec := msgpack.NewDecoder(bytes.NewReader(buf.Bytes()))
		dec.SetCustomStructTag(tag)
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		got, unk, err := c.Decode(buf.Bytes(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if unk != nil {
			t.Fatalf("unknown fields %q in msgpack's own encoding", unk.Paths())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoding\n got %+v\nwant %+v (msgpack)", got, want)
		}
	}
}
