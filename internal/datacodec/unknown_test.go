package datacodec

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// A rolling deploy: PlayerV2 is the newer server's type, PlayerV1 the older
// one's, with every place a newer field can hide.

type StatsV1 struct{ Wins int }

type StatsV2 struct {
	Wins   int
	Losses int
}

type SettingsV1 struct {
	Volume int
	Music  bool
}

type SettingsV2 struct {
	Volume    int
	Music     bool
	Subtitles bool
	Keybinds  map[string]string
}

type ItemV1 struct {
	Count int
	Level int
}

type ItemV2 struct {
	Count   int
	Level   int
	Enchant string
	Sockets map[string]int
}

type QuestV1 struct {
	ID   string
	Step int
}

type QuestV2 struct {
	ID       string
	Step     int
	Progress float64
}

type PetV1 struct{ Name string }

type PetV2 struct {
	Name string
	Mood string
}

type PlayerV1 struct {
	StatsV1   // inlined: Wins is a top-level name
	Coins     int
	Nick      string `msgpack:",omitempty"`
	Settings  SettingsV1
	Inventory map[string]ItemV1
	Slots     map[int]*ItemV1
	Pet       *PetV1
	Quests    []QuestV1
	Loadout   [2]ItemV1
}

type PlayerV2 struct {
	StatsV2
	Coins     int
	Nick      string `msgpack:",omitempty"`
	Settings  SettingsV2
	Inventory map[string]ItemV2
	Slots     map[int]*ItemV2
	Pet       *PetV2
	Quests    []QuestV2
	Loadout   [2]ItemV2
	Gems      int
	Title     string `msgpack:",omitempty"`
}

func newPlayerV2() PlayerV2 {
	return PlayerV2{
		StatsV2:   StatsV2{Wins: 3, Losses: 2},
		Coins:     100,
		Settings:  SettingsV2{Volume: 7, Music: true, Subtitles: true, Keybinds: map[string]string{"jump": "space", "duck": "c"}},
		Inventory: map[string]ItemV2{"sword": {Count: 1, Level: 4, Enchant: "fire", Sockets: map[string]int{"ruby": 1}}, "axe": {Count: 2, Level: 1, Enchant: "ice"}},
		Slots:     map[int]*ItemV2{1: {Count: 5, Enchant: "holy"}, 2: {Count: 6}},
		Pet:       &PetV2{Name: "Rex", Mood: "happy"},
		Quests:    []QuestV2{{ID: "a", Step: 1, Progress: 0.5}, {ID: "b", Step: 2, Progress: 0.25}, {ID: "c", Step: 3}},
		Loadout:   [2]ItemV2{{Count: 1, Enchant: "swift"}, {Count: 2}},
		Gems:      9,
		Title:     "Champion",
	}
}

func mustNew[T any](tb testing.TB, defaults T, opts Options) *Codec[T] {
	tb.Helper()
	c, err := New(defaults, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func mustEncode[T any](tb testing.TB, c *Codec[T], v T, unk *Unknown) []byte {
	tb.Helper()
	b, err := c.Encode(&v, unk)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestRollingDeployKeepsUnknownFields: a profile goes v2 -> v1 -> v2, the
// older server doing something to it in between; every field the older
// server does not know comes back, except where the older server removed
// or (for slice elements) changed the value that held it.
func TestRollingDeployKeepsUnknownFields(t *testing.T) {
	tests := []struct {
		name string
		v1   func(*PlayerV1) // what the older server does
		want func(*PlayerV2) // the newer server then reads the original with these changes
	}{
		{"untouched", func(*PlayerV1) {}, func(*PlayerV2) {}},
		{"known fields changed at every depth",
			func(p *PlayerV1) {
				p.Coins += 10
				p.Wins++
				p.Settings.Volume = 1
				it := p.Inventory["sword"]
				it.Level++
				p.Inventory["sword"] = it
				p.Slots[1].Count = 50
				p.Pet.Name = "Max"
				p.Loadout[0].Count = 9
			},
			func(p *PlayerV2) {
				p.Coins += 10
				p.Wins++
				p.Settings.Volume = 1
				it := p.Inventory["sword"]
				it.Level++
				p.Inventory["sword"] = it
				p.Slots[1].Count = 50
				p.Pet.Name = "Max"
				p.Loadout[0].Count = 9
			}},
		{"map entry deleted: its unknown fields go with it",
			func(p *PlayerV1) { delete(p.Inventory, "axe"); delete(p.Slots, 1) },
			func(p *PlayerV2) { delete(p.Inventory, "axe"); delete(p.Slots, 1) }},
		{"map entry added: it has none",
			func(p *PlayerV1) { p.Inventory["bow"] = ItemV1{Count: 1} },
			func(p *PlayerV2) { p.Inventory["bow"] = ItemV2{Count: 1} }},
		{"map entry replaced under the same key: unknown fields stay with the key",
			func(p *PlayerV1) { p.Slots[1] = &ItemV1{Count: 7} },
			func(p *PlayerV2) { p.Slots[1] = &ItemV2{Count: 7, Enchant: "holy"} }},
		{"pointer cleared",
			func(p *PlayerV1) { p.Pet = nil },
			func(p *PlayerV2) { p.Pet = nil }},
		{"slice element appended",
			func(p *PlayerV1) { p.Quests = append(p.Quests, QuestV1{ID: "d"}) },
			func(p *PlayerV2) { p.Quests = append(p.Quests, QuestV2{ID: "d"}) }},
		{"slice element removed: the others keep theirs (matched by content, not index)",
			func(p *PlayerV1) { p.Quests = p.Quests[1:] },
			func(p *PlayerV2) { p.Quests = p.Quests[1:] }},
		{"slice reordered",
			func(p *PlayerV1) { slices.Reverse(p.Quests) },
			func(p *PlayerV2) { slices.Reverse(p.Quests) }},
		{"slice element changed: that element loses its unknown fields",
			func(p *PlayerV1) { p.Quests[0].Step = 5 },
			func(p *PlayerV2) { p.Quests[0] = QuestV2{ID: "a", Step: 5} }},
	}
	c1 := mustNew(t, PlayerV1{}, Options{})
	c2 := mustNew(t, PlayerV2{}, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := mustEncode(t, c2, newPlayerV2(), nil)
			old, unk, err := c1.Decode(stored, 0)
			if err != nil {
				t.Fatal(err)
			}
			if unk == nil {
				t.Fatal("no unknown fields")
			}
			tt.v1(&old)
			got, _, err := c2.Decode(mustEncode(t, c1, old, unk), 0)
			if err != nil {
				t.Fatal(err)
			}
			want := newPlayerV2()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("v2 -> v1 -> v2:\n got %s\nwant %s", show(got), show(want))
			}
		})
	}
}

func show(v any) string {
	s := fmt.Sprintf("%+v", v)
	rv := reflect.ValueOf(v)
	for i := 0; rv.Kind() == reflect.Struct && i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			s += fmt.Sprintf(" %s=%+v", rv.Type().Field(i).Name, f.Elem())
		}
		if f := rv.Field(i); f.Kind() == reflect.Map {
			for _, k := range f.MapKeys() {
				if e := f.MapIndex(k); e.Kind() == reflect.Pointer && !e.IsNil() {
					s += fmt.Sprintf(" %s[%v]=%+v", rv.Type().Field(i).Name, k, e.Elem())
				}
			}
		}
	}
	return s
}

// TestUnknownPaths: Paths lists where the unknown fields are.
func TestUnknownPaths(t *testing.T) {
	c1 := mustNew(t, PlayerV1{}, Options{})
	c2 := mustNew(t, PlayerV2{}, Options{})
	_, unk, err := c1.Decode(mustEncode(t, c2, newPlayerV2(), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Gems", "Inventory[\"axe\"].Enchant", "Inventory[\"axe\"].Sockets", "Inventory[\"sword\"].Enchant",
		"Inventory[\"sword\"].Sockets", "Loadout[0].Enchant", "Loadout[0].Sockets", "Loadout[1].Enchant",
		"Loadout[1].Sockets", "Losses", "Pet.Mood", "Quests[0].Progress", "Quests[1].Progress", "Quests[2].Progress",
		"Settings.Keybinds", "Settings.Subtitles", "Slots[1].Enchant", "Slots[1].Sockets", "Slots[2].Enchant",
		"Slots[2].Sockets", "Title",
	}
	if got := unk.Paths(); !slices.Equal(got, want) {
		t.Fatalf("Paths:\n got %q\nwant %q", got, want)
	}
}

// TestKnownFieldsComeFromTheType: a name T has is known even when the
// value at hand leaves it out (omitempty), and nothing is unknown when the
// record holds only T's names.
func TestKnownFieldsComeFromTheType(t *testing.T) {
	type withOmit struct {
		Coins int
		Nick  string         `msgpack:",omitempty"`
		Tags  map[string]int `msgpack:"tags,omitempty"`
	}
	c := mustNew(t, withOmit{}, Options{})
	tests := []struct {
		name   string
		record map[string]any
		want   withOmit
	}{
		{"omitempty fields absent", map[string]any{"Coins": 1}, withOmit{Coins: 1}},
		{"omitempty fields present", map[string]any{"Coins": 1, "Nick": "n", "tags": map[string]any{"a": 1}}, withOmit{Coins: 1, Nick: "n", Tags: map[string]int{"a": 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unk, err := c.Decode(marshal(t, tt.record), 0)
			if err != nil {
				t.Fatal(err)
			}
			if unk != nil {
				t.Fatalf("unknown fields %q", unk.Paths())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func marshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := msgpackMarshalSorted(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestOmitEmptyKeepsUnknownFields: an omitempty struct whose known fields
// are all empty is still written when it carries unknown fields; an
// omitempty pointer the older server cleared is left out (and the bytes
// are stable from then on).
func TestOmitEmptyKeepsUnknownFields(t *testing.T) {
	type audioV1 struct{ Volume int }
	type audioV2 struct {
		Volume int
		Voice  int
	}
	type v1 struct {
		Audio audioV1 `msgpack:",omitempty"`
		Pet   *PetV1  `msgpack:",omitempty"`
	}
	type v2 struct {
		Audio audioV2 `msgpack:",omitempty"`
		Pet   *PetV2  `msgpack:",omitempty"`
	}
	c1, c2 := mustNew(t, v1{}, Options{}), mustNew(t, v2{}, Options{})
	tests := []struct {
		name string
		v1   func(*v1)
		want v2
	}{
		{"empty known fields, unknown ones kept", func(*v1) {}, v2{Audio: audioV2{Voice: 7}, Pet: &PetV2{Name: "a", Mood: "m"}}},
		{"pointer cleared", func(p *v1) { p.Pet = nil }, v2{Audio: audioV2{Voice: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, unk, err := c1.Decode(mustEncode(t, c2, v2{Audio: audioV2{Voice: 7}, Pet: &PetV2{Name: "a", Mood: "m"}}, nil), 0)
			if err != nil {
				t.Fatal(err)
			}
			tt.v1(&p)
			b := mustEncode(t, c1, p, unk)
			if again := roundTrip(t, c1, b); !bytes.Equal(again, b) {
				t.Fatalf("not stable:\n%x\n%x", b, again)
			}
			got, _, err := c2.Decode(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
