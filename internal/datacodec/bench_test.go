package datacodec

import (
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The benchmarks compare the codec with the plain msgpack path, in one run:
// msgpack.Marshal(&v) to save, a top-level merge over the defaults
// (mergeDecode below) to load, and a msgpack round trip to copy.
//
//	go test -run '^$' -bench . -benchmem ./internal/datacodec/
//
// The profile is about 2 KiB with 40 map entries: 25 inventory items
// (structs), 15 quest counters. "with-unknown" is a record a newer server
// wrote: two top-level fields, one in Settings and one in every inventory
// item that the benchmark's type does not know.

type benchItem struct {
	Count    int
	Level    int
	Rarity   string
	Bound    bool
	Acquired int64
}

type benchSettings struct {
	Volume      int
	Music       bool
	Language    string
	Sensitivity float64
}

type benchProfile struct {
	Name      string
	Coins     int64
	Gems      int
	Level     int
	XP        int64
	LastLogin time.Time
	Settings  benchSettings
	Inventory map[string]benchItem
	Quests    map[string]int
	Badges    []string
}

// benchProfileNext is benchProfile as a newer server has it.
type benchProfileNext struct {
	Name      string
	Coins     int64
	Gems      int
	Level     int
	XP        int64
	LastLogin time.Time
	Settings  struct {
		Volume      int
		Music       bool
		Language    string
		Sensitivity float64
		Subtitles   bool
	}
	Inventory map[string]struct {
		Count    int
		Level    int
		Rarity   string
		Bound    bool
		Acquired int64
		Enchant  string
	}
	Quests map[string]int
	Badges []string
	Guild  string
	Pets   []string
}

func benchDefaults() benchProfile {
	return benchProfile{
		Coins:     100,
		Settings:  benchSettings{Volume: 80, Music: true, Language: "en", Sensitivity: 1},
		Inventory: map[string]benchItem{},
		Quests:    map[string]int{},
		Badges:    []string{},
	}
}

func benchValue() benchProfile {
	v := benchDefaults()
	v.Name, v.Coins, v.Gems, v.Level, v.XP = "player-4242", 123456, 789, 57, 9876543
	v.LastLogin = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 25 {
		v.Inventory[fmt.Sprintf("item-%02d-%s", i, []string{"sword", "shield", "potion", "gem", "scroll"}[i%5])] = benchItem{
			Count: i * 3, Level: i % 7, Rarity: []string{"common", "rare", "epic"}[i%3], Bound: i%2 == 0, Acquired: 1700000000 + int64(i)*3600,
		}
	}
	for i := range 15 {
		v.Quests[fmt.Sprintf("quest-%02d", i)] = i * 11
	}
	for i := range 10 {
		v.Badges = append(v.Badges, fmt.Sprintf("badge-%d", i))
	}
	return v
}

// benchNextRecord is benchValue as the newer server writes it.
func benchNextRecord(tb testing.TB) []byte {
	tb.Helper()
	v := benchValue()
	b, err := msgpack.Marshal(&v)
	if err != nil {
		tb.Fatal(err)
	}
	var next benchProfileNext
	if err := msgpack.Unmarshal(b, &next); err != nil {
		tb.Fatal(err)
	}
	next.Settings.Subtitles = true
	for k, it := range next.Inventory {
		it.Enchant = "fire"
		next.Inventory[k] = it
	}
	next.Guild, next.Pets = "night-owls", []string{"cat", "dragon"}
	c, err := New(benchProfileNext{}, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	out, err := c.Encode(&next, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// mergeDecode is the plain msgpack load: the record's top-level fields over
// the defaults' top-level fields.
func mergeDecode[T any](defaultsMap map[string]msgpack.RawMessage, stored []byte) (T, error) {
	var fields map[string]msgpack.RawMessage
	var v T
	if err := msgpack.Unmarshal(stored, &fields); err != nil {
		return v, err
	}
	for k, raw := range defaultsMap {
		if _, ok := fields[k]; !ok {
			fields[k] = raw
		}
	}
	merged, err := msgpack.Marshal(fields)
	if err != nil {
		return v, err
	}
	return v, msgpack.Unmarshal(merged, &v)
}

func benchCodec(tb testing.TB) *Codec[benchProfile] {
	tb.Helper()
	c, err := New(benchDefaults(), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func BenchmarkEncode(b *testing.B) {
	c := benchCodec(b)
	v := benchValue()
	withUnknown, unk, err := c.Decode(benchNextRecord(b), 0)
	if err != nil || unk == nil {
		b.Fatal(err, unk)
	}
	plain, _ := msgpack.Marshal(&v)
	b.Logf("profile: %d bytes by msgpack.Marshal, %d map entries", len(plain), len(v.Inventory)+len(v.Quests))
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := msgpack.Marshal(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec/no-unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Encode(&v, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec/with-unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Encode(&withUnknown, unk); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	c := benchCodec(b)
	v := benchValue()
	plain, _ := msgpack.Marshal(&v)
	stored, _ := c.Encode(&v, nil)
	next := benchNextRecord(b)
	defaults := benchDefaults()
	db, _ := msgpack.Marshal(&defaults)
	var defaultsMap map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(db, &defaultsMap); err != nil {
		b.Fatal(err)
	}
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mergeDecode[benchProfile](defaultsMap, plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec/no-unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.Decode(stored, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec/with-unknown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := c.Decode(next, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkClone(b *testing.B) {
	c := benchCodec(b)
	v := benchValue()
	b.Run("baseline", func(b *testing.B) { // the plain copy: a msgpack round trip
		b.ReportAllocs()
		for b.Loop() {
			raw, err := msgpack.Marshal(&v)
			if err != nil {
				b.Fatal(err)
			}
			var out benchProfile
			if err := msgpack.Unmarshal(raw, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Clone(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
