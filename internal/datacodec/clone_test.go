package datacodec

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

type Hidden struct {
	Shown   int
	Ignored []int `msgpack:"-"`
	private map[string]int
}

type Plain struct {
	A, B int
	S    string
	T    time.Time
	Arr  [3]float64
}

type Tags []string

func (t Tags) EncodeMsgpack(e *msgpack.Encoder) error { return e.Encode([]string(t)) }

func (t *Tags) DecodeMsgpack(d *msgpack.Decoder) error {
	var s []string
	err := d.Decode(&s)
	*t = s
	return err
}

type WithCustom struct {
	Tags Tags
	When time.Time
}

type Node struct {
	Name string
	Next *Node
}

// TestClone: a copy that shares no memory, of exactly what the codec
// encodes.
func TestClone(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"equal, and changing the copy changes nothing of the original", func(t *testing.T) {
			c := mustNew(t, PlayerV2{}, Options{})
			orig := newPlayerV2()
			cp, err := c.Clone(&orig)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cp, orig) {
				t.Fatalf("copy %+v differs from %+v", cp, orig)
			}
			cp.Settings.Keybinds["jump"] = "w"
			cp.Inventory["sword"].Sockets["ruby"] = 9
			cp.Slots[1].Count = 99
			cp.Pet.Mood = "sad"
			cp.Quests[0].Step = 42
			cp.Loadout[0].Count = 7
			if !reflect.DeepEqual(orig, newPlayerV2()) {
				t.Fatalf("the original changed: %s", show(orig))
			}
		}},
		{"nil and empty stay apart", func(t *testing.T) {
			c := mustNew(t, Profile{}, Options{})
			v := Profile{Inventory: map[string]int{}, Friends: nil}
			cp, _ := c.Clone(&v)
			if cp.Inventory == nil || cp.Friends != nil || cp.Items != nil {
				t.Fatalf("got %+v", cp)
			}
		}},
		{"fields the codec does not encode are zero", func(t *testing.T) {
			c := mustNew(t, Hidden{}, Options{})
			cp, _ := c.Clone(&Hidden{Shown: 1, Ignored: []int{1}, private: map[string]int{"x": 1}})
			if !reflect.DeepEqual(cp, Hidden{Shown: 1}) {
				t.Fatalf("got %+v", cp)
			}
		}},
		{"values inside interfaces are copied", func(t *testing.T) {
			c := mustNew(t, Deep{}, Options{})
			v := deepValue()
			cp, _ := c.Clone(&v)
			cp.Any["k"].(map[string]any)["a"].([]any)[0].(map[string]any)["x"] = 100
			if !reflect.DeepEqual(v, deepValue()) {
				t.Fatal("the original changed through an interface")
			}
		}},
		{"a custom type with references is copied through msgpack", func(t *testing.T) {
			c := mustNew(t, WithCustom{}, Options{})
			v := WithCustom{Tags: Tags{"a"}, When: time.Unix(5, 0).UTC()}
			cp, err := c.Clone(&v)
			if err != nil {
				t.Fatal(err)
			}
			cp.Tags[0] = "changed"
			if v.Tags[0] != "a" || !cp.When.Equal(v.When) {
				t.Fatalf("got %+v from %+v", cp, v)
			}
		}},
		{"a value without references is one assignment", func(t *testing.T) {
			c := mustNew(t, Plain{}, Options{})
			if !c.root.pure {
				t.Fatal("Plain is not pure")
			}
			v := Plain{A: 1, S: "s", T: time.Now(), Arr: [3]float64{1, 2, 3}}
			if cp, _ := c.Clone(&v); cp != v {
				t.Fatalf("got %+v", cp)
			}
		}},
		{"a nil value fails", func(t *testing.T) {
			c := mustNew(t, Node{}, Options{})
			if _, err := c.Clone(nil); !errors.Is(err, ErrNilValue) {
				t.Fatalf("Clone: %v", err)
			}
			if _, err := c.Encode(nil, nil); !errors.Is(err, ErrNilValue) {
				t.Fatalf("Encode: %v", err)
			}
		}},
		{"a cycle fails", func(t *testing.T) {
			c := mustNew(t, Node{}, Options{})
			n := &Node{Name: "loop"}
			n.Next = n
			if _, err := c.Clone(n); !errors.Is(err, ErrNotATree) {
				t.Fatalf("Clone: %v", err)
			}
			if _, err := c.Encode(n, nil); !errors.Is(err, ErrNotATree) {
				t.Fatalf("Encode: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestUnknownOfAnotherCodec: Encode refuses an Unknown that does not fit.
func TestUnknownOfAnotherCodec(t *testing.T) {
	c1 := mustNew(t, PlayerV1{}, Options{})
	other := mustNew(t, PlayerV1{}, Options{})
	_, unk, _ := c1.Decode(mustEncode(t, mustNew(t, PlayerV2{}, Options{}), newPlayerV2(), nil), 0)
	if _, err := other.Encode(&PlayerV1{}, unk); !errors.Is(err, ErrUnknownMismatch) {
		t.Fatalf("got %v", err)
	}
}
