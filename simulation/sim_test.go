package simulation_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/simulation"
)

var (
	seeds    = flag.Int("sim.seeds", 0, "number of seeds to run (default: $PLAYERDATA_SIM_SEEDS, else 4)")
	first    = flag.Uint64("sim.first", 1000, "first seed of the range")
	oneSeed  = flag.Uint64("sim.seed", 0, "run this one seed and print its whole trace")
	long     = flag.Bool("sim.long", false, "use the long config (4 servers, 120 players, 2 h) instead of the short one")
	duration = flag.Duration("sim.duration", 0, "virtual time per run (overrides the config)")
)

// regressions are seeds that found bugs, run on every go test (see the
// README's simulation report).
var regressions = []uint64{
	1018, 1020, // a fenced server kept its sessions' locks: players locked out while it lived
	3056, // a release after an unlanded adoption took an earlier lost-answer release for its own and dropped newer progress
}

// run is one seed to run and whether it takes the long config.
type run struct {
	seed uint64
	long bool
}

func (r run) config() simulation.Config {
	cfg := simulation.ShortConfig(r.seed)
	if r.long {
		cfg = simulation.DefaultConfig(r.seed)
	}
	if *duration > 0 {
		cfg.Duration = *duration
	}
	return cfg
}

// TestSimulation runs the seeds. go test runs the regressions and 4 more;
// -sim.seeds N (or PLAYERDATA_SIM_SEEDS=N) runs N, -sim.seed S one.
func TestSimulation(t *testing.T) {
	n := 4
	if v, err := strconv.Atoi(os.Getenv("PLAYERDATA_SIM_SEEDS")); err == nil && v > 0 {
		n = v
	}
	if *seeds > 0 {
		n = *seeds
	}
	longRuns := *long || os.Getenv("PLAYERDATA_SIM_LONG") != ""
	var list []run
	for _, seed := range regressions {
		list = append(list, run{seed: seed})
	}
	if *oneSeed != 0 {
		list = []run{{seed: *oneSeed, long: longRuns}}
	} else {
		for i := range n {
			list = append(list, run{seed: *first + uint64(i), long: longRuns})
		}
	}
	start := time.Now()
	t.Cleanup(func() { t.Logf("%d seeds in %s", len(list), time.Since(start).Round(time.Millisecond)) })
	for _, r := range list {
		seed := r.seed
		name := strconv.FormatUint(seed, 10)
		if r.long {
			name += "-long"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				res := simulation.Run(t, r.config())
				if res.Failure != nil && *oneSeed != 0 {
					t.Logf("trace:\n%s", simulation.Tail(res.Trace, len(res.Trace)))
				}
				if res.Failure != nil {
					replay := fmt.Sprintf("go test ./simulation/ -run 'TestSimulation$' -sim.seed %d", seed)
					if r.long {
						replay += " -sim.long"
					}
					t.Fatalf("seed %d: %v\nreplay: %s\ntrace (last 60 steps):\n%s",
						seed, res.Failure, replay, simulation.Tail(res.Trace, 60))
				}
				if *oneSeed != 0 {
					t.Logf("trace:\n%s", simulation.Tail(res.Trace, len(res.Trace)))
				}
				t.Logf("seed %d: %d steps, %d joins (%d refused, %d hops), %d trades, %d faults, %d crashes, %d script calls",
					seed, res.Steps, res.Joins, res.Refused, res.Hops, res.Trades, res.Faults, res.Crashes, res.Scripts)
			})
		})
	}
}

// TestSimulationReplays runs one seed twice: the traces must match line for
// line.
func TestSimulationReplays(t *testing.T) {
	var traces [2][]string
	for i := range traces {
		synctest.Test(t, func(t *testing.T) {
			cfg := simulation.ShortConfig(7)
			cfg.Duration = 15 * time.Minute
			res := simulation.Run(t, cfg)
			if res.Failure != nil {
				t.Fatalf("seed 7: %v", res.Failure)
			}
			traces[i] = res.Trace
		})
	}
	for i := range min(len(traces[0]), len(traces[1])) {
		if traces[0][i] != traces[1][i] {
			t.Fatalf("the replay differs at step %d:\n  first:  %s\n  replay: %s\ncontext:\n%s", i, traces[0][i], traces[1][i],
				strings.Join(traces[0][max(0, i-10):i], "\n"))
		}
	}
	if len(traces[0]) != len(traces[1]) {
		t.Fatalf("the replay has %d lines, the first run %d", len(traces[1]), len(traces[0]))
	}
}
