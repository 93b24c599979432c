package datacodec

import (
	"reflect"
	"testing"
)

type Audio struct {
	Volume int
	Music  bool
	Voice  int
}

type Prefs struct {
	Audio    Audio
	Language string
	Keybinds map[string]string
}

type Gear struct {
	Level      int
	Durability int
	Sockets    map[string]string
}

type Pet struct{ Name string }

type Profile struct {
	Coins     int
	Prefs     Prefs
	Inventory map[string]int
	Items     map[string]Gear
	Friends   []string
	Pet       *Pet
}

func profileDefaults() Profile {
	return Profile{
		Coins:     100,
		Prefs:     Prefs{Audio: Audio{Volume: 80, Music: true, Voice: 50}, Language: "en", Keybinds: map[string]string{"jump": "space"}},
		Inventory: map[string]int{"starter-sword": 1},
		Items:     map[string]Gear{"starter": {Level: 1, Durability: 100, Sockets: map[string]string{}}},
		Friends:   []string{},
		Pet:       &Pet{Name: "Rex"},
	}
}

// TestDefaultsFillWhatTheRecordLacks: a record written by an older server
// (here: built by hand) is read over the defaults at every depth.
func TestDefaultsFillWhatTheRecordLacks(t *testing.T) {
	def := profileDefaults
	tests := []struct {
		name   string
		record map[string]any
		want   func(*Profile)
	}{
		{"empty record: all defaults", map[string]any{}, func(*Profile) {}},
		{"missing top-level fields take their defaults", map[string]any{"Coins": 5},
			func(p *Profile) { p.Coins = 5 }},
		{"missing nested fields take their defaults",
			map[string]any{"Prefs": map[string]any{"Audio": map[string]any{"Volume": 10}}},
			func(p *Profile) { p.Prefs.Audio.Volume = 10 }},
		{"stored nil map becomes empty, not nil",
			map[string]any{"Inventory": nil, "Prefs": map[string]any{"Keybinds": nil}},
			func(p *Profile) { p.Inventory = map[string]int{}; p.Prefs.Keybinds = map[string]string{} }},
		{"stored nil slice becomes empty, not nil", map[string]any{"Friends": nil},
			func(p *Profile) { p.Friends = []string{} }},
		{"stored map replaces the default map whole (no starter item comes back)",
			map[string]any{"Inventory": map[string]any{"axe": 1}},
			func(p *Profile) { p.Inventory = map[string]int{"axe": 1} }},
		{"map entry: missing fields from the default entry of the same key, none for other keys",
			map[string]any{"Items": map[string]any{"starter": map[string]any{"Level": 3}, "bow": map[string]any{"Level": 2}}},
			func(p *Profile) {
				p.Items = map[string]Gear{"starter": {Level: 3, Durability: 100, Sockets: map[string]string{}}, "bow": {Level: 2}}
			}},
		{"stored values win, zero values too",
			map[string]any{"Coins": 0, "Prefs": map[string]any{"Audio": map[string]any{"Music": false}, "Language": ""}},
			func(p *Profile) { p.Coins = 0; p.Prefs.Audio.Music = false; p.Prefs.Language = "" }},
		{"stored nil pointer stays nil", map[string]any{"Pet": nil},
			func(p *Profile) { p.Pet = nil }},
		{"stored pointer is read over the default's pointee", map[string]any{"Pet": map[string]any{}},
			func(*Profile) {}},
		{"stored nil struct counts as absent", map[string]any{"Prefs": nil},
			func(*Profile) {}},
	}
	c := mustNew(t, def(), Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unk, err := c.Decode(marshal(t, tt.record), 0)
			if err != nil {
				t.Fatal(err)
			}
			if unk != nil {
				t.Fatalf("unknown fields %q", unk.Paths())
			}
			want := def()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("\n got %+v %+v\nwant %+v %+v", got, got.Pet, want, want.Pet)
			}
		})
	}
}

// TestDefaultsAreCopies: the decoded value and the defaults share nothing,
// and changing the value passed to New changes nothing either.
func TestDefaultsAreCopies(t *testing.T) {
	def := profileDefaults()
	c := mustNew(t, def, Options{})
	def.Inventory["leaked"] = 1
	for _, stored := range [][]byte{nil, marshal(t, map[string]any{})} {
		p, _, err := c.Decode(stored, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Inventory["leaked"]; ok {
			t.Fatal("New kept the caller's map")
		}
		p.Inventory["sword"]++ // no panic on a nil map
		p.Prefs.Keybinds["fire"] = "x"
		p.Items["starter"].Sockets["a"] = "b"
		p.Pet.Name = "changed"
	}
	q, _, err := c.Decode(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(q, profileDefaults()) {
		t.Fatalf("defaults changed through a decoded value: %+v", q)
	}
}
