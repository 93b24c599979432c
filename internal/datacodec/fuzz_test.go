package datacodec

import (
	"bytes"
	"sync"
	"testing"
)

type Tree struct {
	Name string
	Kids []Tree
	Next *Tree
	By   map[string]Tree
	Any  any
}

// FuzzDecode: no input makes Decode panic, whatever T; and what decodes
// encodes, and that encoding decodes and encodes to itself.
//
//	go test -run '^$' -fuzz FuzzDecode -fuzztime 60s ./internal/datacodec/
func FuzzDecode(f *testing.F) {
	c1 := mustNew(f, PlayerV1{Inventory: map[string]ItemV1{}}, Options{})
	c2 := mustNew(f, PlayerV2{}, Options{})
	cd := mustNew(f, Deep{}, Options{})
	cs := mustNew(f, Sized{}, Options{})
	ct := mustNew(f, Tree{}, Options{})
	cm := mustNew(f, PlayerV3{}, Options{Migrations: playerMigrations(false)})
	for _, seed := range [][]byte{
		mustEncode(f, c2, newPlayerV2(), nil),
		mustEncode(f, c1, PlayerV1{Coins: 1}, nil),
		mustEncode(f, cd, deepValue(), nil),
		mustEncode(f, cs, Sized{S: "x", B: []byte{1}, Any: map[string]any{"a": []any{1}}}, nil),
		mustEncode(f, ct, Tree{Name: "r", Kids: []Tree{{Name: "k"}}, Next: &Tree{}, By: map[string]Tree{"x": {}}}, nil),
		marshal(f, map[string]any{"Gold": 5, "Wins": 1}),
		{0xc0}, {}, {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzOne(t, c1, b)
		fuzzOne(t, c2, b)
		fuzzOne(t, cd, b)
		fuzzOne(t, cs, b)
		fuzzOne(t, ct, b)
		fuzzOne(t, cm, b)
	})
}

func fuzzOne[T any](t *testing.T, c *Codec[T], b []byte) {
	v, unk, err := c.Decode(b, 0)
	if err != nil {
		return
	}
	out, err := c.Encode(&v, unk)
	if err != nil {
		t.Fatalf("%T decoded but does not encode: %v", v, err)
	}
	v2, unk2, err := c.Decode(out, c.Version())
	if err != nil {
		t.Fatalf("%T: its own encoding does not decode: %v\n%x", v, err, out)
	}
	again, err := c.Encode(&v2, unk2)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("%T: decode -> encode is not stable (%v):\n%x\n%x", v, err, out, again)
	}
	if _, err := c.Clone(&v2); err != nil {
		t.Fatalf("%T: clone: %v", v, err)
	}
}

// TestConcurrentUse: one codec, many goroutines (run with -race); the
// interface values make the codec build plans while others use it.
func TestConcurrentUse(t *testing.T) {
	c := mustNew(t, Deep{}, Options{})
	c1 := mustNew(t, PlayerV1{}, Options{})
	stored := mustEncode(t, mustNew(t, PlayerV2{}, Options{}), newPlayerV2(), nil)
	type fresh struct{ X, Y int }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				v := deepValue()
				v.Any["new"] = []fresh{{g, i}}
				b, err := c.Encode(&v, nil)
				if err != nil {
					t.Error(err)
					return
				}
				w, _, err := c.Decode(b, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Clone(&w); err != nil {
					t.Error(err)
					return
				}
				p, unk, err := c1.Decode(stored, 0)
				if err == nil {
					_, err = c1.Encode(&p, unk)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
