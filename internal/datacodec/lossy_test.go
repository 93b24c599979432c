//lint:file-ignore U1000 unexported fields are what these tests are about: types whose fields the codec cannot store

package datacodec

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

type lossyStats struct {
	Level  int
	secret string
}

type lossyBase struct {
	Name string
	note string
}

type lossyItem struct {
	Count int
	Extra any
}

type lossyTree struct {
	Kids []lossyTree
	tag  string
}

type selfEncoded struct{ hidden int }

func (s selfEncoded) MarshalMsgpack() ([]byte, error)  { return msgpack.Marshal(s.hidden) }
func (s *selfEncoded) UnmarshalMsgpack(b []byte) error { return msgpack.Unmarshal(b, &s.hidden) }

// lossy is the LossyFields of a codec for T made with opts.
func lossy[T any](t *testing.T, opts Options) []LossyField {
	t.Helper()
	var zero T
	c, err := New(zero, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c.LossyFields()
}

func TestLossyFields(t *testing.T) {
	u, i := LossUnexported, LossInterface
	type clean struct {
		Coins    int
		Items    map[string]int
		When     time.Time
		Raw      msgpack.RawMessage
		Skipped  any      `msgpack:"-"`
		gone     string   `msgpack:"-"`
		_msgpack struct{} `msgpack:",omitempty"`
		_        int
	}
	type top struct {
		Coins  int
		secret string
	}
	type nested struct{ Stats lossyStats }
	type inMap struct{ Bag map[string]lossyStats }
	type inSlice struct{ Quests []lossyItem }
	type behindPtr struct{ Stats *lossyStats }
	type embedded struct {
		lossyBase
		Coins int
	}
	type anyField struct {
		Coins int
		Extra any
		More  interface{ Len() int }
	}
	type anyMaps struct {
		Bag   map[string]any
		List  []any
		Index map[any]int
	}
	type custom struct {
		S selfEncoded
		M sync.Mutex `msgpack:"-"`
	}
	type twice struct {
		A lossyStats
		B lossyStats
	}
	type jsonTagged struct {
		Coins  int
		secret string `json:"-"`
		Extra  any    `json:"-"`
	}
	tests := []struct {
		name string
		got  func(t *testing.T, opts Options) []LossyField
		want []LossyField
	}{
		{"exported concrete fields, skipped ones, self-encoding types", lossy[clean], nil},
		{"an unexported field", lossy[top], []LossyField{{"top.secret", u}}},
		{"in a nested struct", lossy[nested], []LossyField{{"nested.Stats.secret", u}}},
		{"in a map value", lossy[inMap], []LossyField{{"inMap.Bag[].secret", u}}},
		{"an any in a slice element", lossy[inSlice], []LossyField{{"inSlice.Quests[].Extra", i}}},
		{"behind a pointer", lossy[behindPtr], []LossyField{{"behindPtr.Stats.secret", u}}},
		{"in an inlined embedded struct", lossy[embedded], []LossyField{{"embedded.lossyBase.note", u}}},
		{"any and other interfaces", lossy[anyField], []LossyField{{"anyField.Extra", i}, {"anyField.More", i}}},
		{"interface map values, slice elements, map keys", lossy[anyMaps],
			[]LossyField{{"anyMaps.Bag[]", i}, {"anyMaps.List[]", i}, {"anyMaps.Index{key}", i}}},
		{"a type that encodes itself; a skipped mutex", lossy[custom], nil},
		{"a recursive type, once", lossy[lossyTree], []LossyField{{"lossyTree.tag", u}}},
		{"a struct type met twice, named once", lossy[twice], []LossyField{{"twice.A.secret", u}}},
		{"a top-level map of any", lossy[map[string]any], []LossyField{{"map[string]interface {}[]", i}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(t, Options{}); !slices.Equal(got, tc.want) {
				t.Errorf("LossyFields = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run(`json:"-" with TagName json`, func(t *testing.T) {
		if got := lossy[jsonTagged](t, Options{TagName: "json"}); got != nil {
			t.Errorf("LossyFields = %v, want none", got)
		}
		want := []LossyField{{"jsonTagged.secret", u}, {"jsonTagged.Extra", i}}
		if got := lossy[jsonTagged](t, Options{}); !slices.Equal(got, want) {
			t.Errorf("without TagName json: LossyFields = %v, want %v", got, want)
		}
	})
}

// TestLossyFieldsLoseData: what LossyFields names is lost for real in a
// round trip, and what it does not name is kept.
func TestLossyFieldsLoseData(t *testing.T) {
	type player struct {
		Coins  int
		Extra  any
		secret string
	}
	c := mustNew(t, player{}, Options{})
	in := player{Coins: 5, Extra: 5, secret: "s3cr3t"}
	out, _, err := c.Decode(mustEncode(t, c, in, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Coins != 5 {
		t.Errorf("Coins = %d, want 5", out.Coins)
	}
	if out.secret != "" {
		t.Errorf("secret = %q after a round trip, want it dropped (as LossyFields says)", out.secret)
	}
	if _, isInt := out.Extra.(int); isInt {
		t.Errorf("Extra came back as an int, want another type (as LossyFields says): %T", out.Extra)
	}
	if got := len(c.LossyFields()); got != 2 {
		t.Errorf("LossyFields names %d fields, want 2: %v", got, c.LossyFields())
	}
}
