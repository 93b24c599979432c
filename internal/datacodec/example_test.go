package datacodec_test

import (
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/datacodec"
)

// A rolling deploy: the newer server added Settings.Subtitles and Gems;
// a profile saved by it is loaded and saved by an older server, then
// loaded by the newer one again. Nothing is lost.
func Example() {
	type SettingsV1 struct{ Volume int }
	type PlayerV1 struct {
		Coins    int
		Settings SettingsV1
	}
	type SettingsV2 struct {
		Volume    int
		Subtitles bool
	}
	type PlayerV2 struct {
		Coins    int
		Settings SettingsV2
		Gems     int
	}
	older, _ := datacodec.New(PlayerV1{}, datacodec.Options{})
	newer, _ := datacodec.New(PlayerV2{}, datacodec.Options{})

	saved, _ := newer.Encode(&PlayerV2{Coins: 10, Settings: SettingsV2{Volume: 5, Subtitles: true}, Gems: 3}, nil)

	p, unknown, _ := older.Decode(saved, 0)
	fmt.Println("the older server keeps", unknown.Paths())
	p.Coins += 5
	saved, _ = older.Encode(&p, unknown)

	q, _, _ := newer.Decode(saved, 0)
	fmt.Printf("%+v\n", q)
	// Output:
	// the older server keeps [Gems Settings.Subtitles]
	// {Coins:15 Settings:{Volume:5 Subtitles:true} Gems:3}
}

// Fields a record lacks take their defaults at every depth; a stored map
// replaces the default map, and one stored as nil becomes empty.
func ExampleCodec_Decode_defaults() {
	type Audio struct{ Volume, Voice int }
	type Player struct {
		Coins     int
		Audio     Audio
		Inventory map[string]int
	}
	c, _ := datacodec.New(Player{Coins: 100, Audio: Audio{Volume: 80, Voice: 50}, Inventory: map[string]int{"starter-sword": 1}}, datacodec.Options{})

	// A record an older server wrote before Voice existed: {"Audio": {"Volume": 10}, "Inventory": nil}.
	old := []byte{0x82, 0xa5, 'A', 'u', 'd', 'i', 'o', 0x81, 0xa6, 'V', 'o', 'l', 'u', 'm', 'e', 0x0a,
		0xa9, 'I', 'n', 'v', 'e', 'n', 't', 'o', 'r', 'y', 0xc0}
	p, _, _ := c.Decode(old, 0)
	p.Inventory["potion"]++ // an empty map, not nil
	fmt.Printf("%+v\n", p)
	// Output:
	// {Coins:100 Audio:{Volume:10 Voice:50} Inventory:map[potion:1]}
}

// A rename is a migration that is not backward compatible: servers of
// version 0 must not load what version 1 writes.
func ExampleMigration() {
	type Player struct{ Coins int }
	c, _ := datacodec.New(Player{}, datacodec.Options{Migrations: []datacodec.Migration{{
		Apply: func(m map[string]any) error {
			m["Coins"] = m["Gold"]
			delete(m, "Gold")
			return nil
		},
	}}})
	fmt.Println("version", c.Version(), "min reader", c.MinReader())

	v0 := []byte{0x81, 0xa4, 'G', 'o', 'l', 'd', 0x07} // {"Gold": 7}, written at version 0
	p, _, _ := c.Decode(v0, 0)
	fmt.Printf("%+v\n", p)
	ver, minReader := c.WriteVersion(0, 0)
	fmt.Println("store with version", ver, "min reader", minReader)
	// Output:
	// version 1 min reader 1
	// {Coins:7}
	// store with version 1 min reader 1
}

// A value that does not fit T names its place.
func ExampleFieldError() {
	type Item struct{ Level int }
	type Player struct{ Inventory map[string]Item }
	c, _ := datacodec.New(Player{}, datacodec.Options{})

	bad := []byte{0x81, 0xa9, 'I', 'n', 'v', 'e', 'n', 't', 'o', 'r', 'y', 0x81, 0xa5, 's', 'w', 'o', 'r', 'd',
		0x81, 0xa5, 'L', 'e', 'v', 'e', 'l', 0xa3, 'm', 'a', 'x'} // {"Inventory": {"sword": {"Level": "max"}}}
	_, _, err := c.Decode(bad, 0)
	var fe *datacodec.FieldError
	if errors.As(err, &fe) {
		fmt.Println(fe.Path)
	}
	fmt.Println(errors.Is(err, datacodec.ErrTypeMismatch))
	fmt.Println(err)
	// Output:
	// Inventory["sword"].Level
	// true
	// datacodec: decode Inventory["sword"].Level: datacodec: stored value does not fit the type: msgpack str into int
}

// The same value always encodes to the same bytes, so a save can be
// skipped when nothing changed.
func ExampleCodec_Encode() {
	type Player struct{ Quests map[string]int }
	c, _ := datacodec.New(Player{}, datacodec.Options{})
	p := Player{Quests: map[string]int{"c": 3, "a": 1, "b": 2}}
	first, _ := c.Encode(&p, nil)
	same := true
	for range 20 {
		b, _ := c.Encode(&p, nil)
		same = same && string(b) == string(first)
	}
	fmt.Printf("%q %v\n", first, same)
	// Output:
	// "\x81\xa6Quests\x83\xa1a\x01\xa1b\x02\xa1c\x03" true
}

// Clone gives a copy that shares nothing with the original.
func ExampleCodec_Clone() {
	type Player struct{ Items map[string]int }
	c, _ := datacodec.New(Player{}, datacodec.Options{})
	p := Player{Items: map[string]int{"sword": 1}}
	cp, _ := c.Clone(&p)
	cp.Items["sword"] = 0
	fmt.Println(p.Items["sword"], cp.Items["sword"])
	// Output:
	// 1 0
}
