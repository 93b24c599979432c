package bench

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// gameProfile is the profile of the history figures: what a game keeps of
// a player, the msgpack of a struct with maps and numbers (counters, an
// inventory, quest states, statistics). Unlike profileData's random blob it
// compresses as profiles do, and consecutive versions of it differ in the
// values a session changed.
type gameProfile struct {
	Name      string               `msgpack:"name"`
	Coins     int64                `msgpack:"coins"`
	Gems      int64                `msgpack:"gems"`
	XP        int64                `msgpack:"xp"`
	Level     int64                `msgpack:"level"`
	LastLogin int64                `msgpack:"last_login"`
	Messages  int64                `msgpack:"messages"` // messages applied (OnMessage)
	Inventory map[string]int64     `msgpack:"inventory"`
	Quests    map[string]questStep `msgpack:"quests"`
	Stats     map[string]float64   `msgpack:"stats"`
}

// questStep is one quest's state.
type questStep struct {
	Step    int64 `msgpack:"step"`
	Done    bool  `msgpack:"done"`
	Started int64 `msgpack:"started"`
}

// The items, quests and statistics a gameProfile draws its names from.
var (
	itemNames = []string{"sword", "shield", "potion", "arrow", "bow", "helm", "boots", "ring", "gem", "ore", "wood",
		"stone", "herb", "scroll", "key", "map", "torch", "rope", "bread", "fish"}
	statNames = []string{"kills", "deaths", "playtime", "distance", "crafted", "accuracy", "trades", "gold_spent"}
)

// gameQuests is how many quests a gameProfile tracks.
const gameQuests = 14

// newGameProfile returns a profile whose msgpack is about size bytes: its
// inventory grows until it is.
func newGameProfile(size int, rng *rand.Rand) *gameProfile {
	p := &gameProfile{Name: "player_4821", Coins: 12000, Gems: 40, XP: 99812, Level: 31, LastLogin: 1718000000000,
		Inventory: map[string]int64{}, Quests: map[string]questStep{}, Stats: map[string]float64{}}
	for i := range gameQuests {
		p.Quests[fmt.Sprintf("quest_%03d", i*7)] = questStep{Step: rng.Int64N(10), Done: rng.IntN(2) == 0,
			Started: 1717000000000 + rng.Int64N(1e9)}
	}
	for _, s := range statNames {
		p.Stats[s] = math.Round(rng.Float64()*1e6) / 100
	}
	// Items are added in batches of a 64th of what is missing (an item
	// takes under 64 bytes, so a batch never passes size), the last ones one
	// at a time: the profile is the one adding them singly would make.
	for i := 0; ; {
		n := p.encodedSize()
		if n >= size {
			return p
		}
		for range max(1, (size-n)/64) {
			p.Inventory[fmt.Sprintf("%s_%02d", itemNames[i%len(itemNames)], i)] = rng.Int64N(200)
			i++
		}
	}
}

// encodedSize is the length of p's msgpack.
func (p *gameProfile) encodedSize() int {
	b, _ := msgpack.Marshal(p)
	return len(b)
}

// values counts the profile's values a session may change.
func (p *gameProfile) values() int { return 5 + len(p.Inventory) + 2*len(p.Quests) + len(p.Stats) }

// change changes frac of the profile's values (at least one), as a session
// of play does: counters grow, items come and go, quests advance.
func (p *gameProfile) change(frac float64, rng *rand.Rand) {
	var edits []func()
	edits = append(edits,
		func() { p.Coins += rng.Int64N(5000) - 1000 },
		func() { p.Gems += rng.Int64N(20) },
		func() { p.XP += rng.Int64N(3000) },
		func() { p.Level++ },
		func() { p.LastLogin += 3_600_000 })
	for _, k := range slices.Sorted(maps.Keys(p.Inventory)) {
		edits = append(edits, func() { p.Inventory[k] = rng.Int64N(300) })
	}
	for _, k := range slices.Sorted(maps.Keys(p.Quests)) {
		edits = append(edits,
			func() { q := p.Quests[k]; q.Step++; p.Quests[k] = q },
			func() { q := p.Quests[k]; q.Done = !q.Done; p.Quests[k] = q })
	}
	for _, k := range slices.Sorted(maps.Keys(p.Stats)) {
		edits = append(edits, func() { p.Stats[k] += math.Round(rng.Float64()*1e5) / 100 })
	}
	n := max(1, int(math.Round(frac*float64(len(edits)))))
	rng.Shuffle(len(edits), func(i, j int) { edits[i], edits[j] = edits[j], edits[i] })
	for _, e := range edits[:n] {
		e()
	}
}

// clone is a deep copy of p.
func (p *gameProfile) clone() *gameProfile {
	c := *p
	c.Inventory, c.Quests, c.Stats = maps.Clone(p.Inventory), maps.Clone(p.Quests), maps.Clone(p.Stats)
	return &c
}
