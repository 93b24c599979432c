package simulation_test

import (
	"fmt"

	"github.com/ckernel/playerdata/simulation"
)

// A run is a function of its seed and its shape; simulation.Run plays it
// inside a testing/synctest bubble (see TestSimulation).
func ExampleShortConfig() {
	cfg := simulation.ShortConfig(42)
	fmt.Printf("seed %d: %d servers, %d players, %s of game time in steps of %s\n",
		cfg.Seed, cfg.Servers, cfg.Players, cfg.Duration, cfg.Step)
	// Output: seed 42: 3 servers, 40 players, 15m0s of game time in steps of 2s
}
