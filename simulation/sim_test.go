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
	long     = flag.Bool("sim.long", false, "use the long config (4 servers, 200 players, 2 h) instead of the short one")
	duration = flag.Duration("sim.duration", 0, "virtual time per run (overrides the config)")
	classic  = flag.Bool("sim.classic", false, "draw only the classic faults, none that hang nor tamper (Config.Hangs and Tampers off)")
	tampers  = flag.Bool("sim.tampers", true, "draw the tampers too (Config.Tampers): broken fields, deleted records, an evicted owners hash")
)

// regression is a seed that found a bug, run on every go test (see the
// README's simulation report). Every one was found before the tampers
// existed, and replays that run (Config.Tampers off).
type regression struct {
	seed uint64
	// classic: the seed was found with the classic faults only, and
	// replays that run (Config.Hangs off).
	classic bool
	// what the seed found.
	what string
}

// regressions are the seeds that found bugs.
var regressions = []regression{
	{seed: 1018, classic: true, what: "a fenced server kept its sessions' locks: players locked out while it lived"},
	{seed: 1020, classic: true, what: "a fenced server kept its sessions' locks: players locked out while it lived"},
	{seed: 3056, classic: true, what: "a release after an unlanded adoption took an earlier lost-answer release for its own and dropped newer progress"},
	{seed: 5005, what: "an acquire that hangs holds Join until its caller's context ends: 1m0s, past LockWait + SaveTimeout"},
	{seed: 10160, what: "an acquire landed, its answer was lost at the join's deadline: p033 stays locked by live server-2 for good"},
	{seed: 5036, what: "a wait woke 9 ms after an alive reading (4 ms left), was served it again and parked for 0 s: acquires forever at one instant"},
	{seed: 7015, classic: true, what: "the same hot loop with the classic faults (the run never ended without the hot-loop watchdog)"},
	{seed: 1019, what: "a message applied while a trade's outcome was unknown (commit answer lost) was lost: the save that " +
		"learned the trade had committed wrote its image and deleted the message from the inbox"},
	{seed: 1073, what: "a trade's save aborted an earlier trade of unknown outcome in the journal under the Trade's context alone: " +
		"the abort hung, and Trade with it, for good"},
	{seed: 11487, what: "a join whose acquire found a trade mark aborted the trade in the journal under its caller's context alone: " +
		"a hung journal call held the join 1m0s, past LockWait + SaveTimeout"},
}

// run is one seed to run and how.
type run struct {
	seed      uint64
	long      bool
	classic   bool // without the faults that hang (nor the tampers)
	noTampers bool // without the tampers
}

func (r run) config() simulation.Config {
	cfg := simulation.ShortConfig(r.seed)
	if r.long {
		cfg = simulation.DefaultConfig(r.seed)
	}
	if *duration > 0 {
		cfg.Duration = *duration
	}
	if r.classic {
		cfg.Hangs = false
	}
	if r.classic || r.noTampers {
		cfg.Tampers = false
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
	for _, r := range regressions {
		list = append(list, run{seed: r.seed, classic: r.classic, noTampers: true})
	}
	if *oneSeed != 0 {
		list = []run{{seed: *oneSeed, long: longRuns, classic: *classic, noTampers: !*tampers}}
	} else {
		for i := range n {
			list = append(list, run{seed: *first + uint64(i), long: longRuns, classic: *classic, noTampers: !*tampers})
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
					if r.classic {
						replay += " -sim.classic"
					} else if r.noTampers {
						replay += " -sim.tampers=false"
					}
					t.Fatalf("seed %d: %v\nreplay: %s\ntrace (last 60 steps):\n%s",
						seed, res.Failure, replay, simulation.Tail(res.Trace, 60))
				}
				if *oneSeed != 0 {
					t.Logf("trace:\n%s", simulation.Tail(res.Trace, len(res.Trace)))
				}
				t.Logf("seed %d: %d steps, %d joins (%d refused, %d hops), %d trades (%d of unknown outcome), %d faults (%d hangs, %d pauses), %d crashes, "+
					"%d fenced, %d updates at resume (%d refused), %d refused after another's acquire, %d script calls, %d moves to a chosen server (%d landed), %d late saves (%d refused as late); %v; %v",
					seed, res.Steps, res.Joins, res.Refused, res.Hops, res.Trades, res.TradesUnknown, res.Faults, res.Hangs, res.Pauses,
					res.Crashes, res.Fenced, res.ResumeUpdates, res.ResumeRefused, res.Guarded, res.Scripts, res.MovesTo, res.MovedTo,
					res.LateSaves, res.LateRefused, res.Messages, res.Tampers)
			})
		})
	}
}

// replaySeeds are the seeds TestSimulationReplays runs twice: 7, and seeds
// whose replays differed before the bus had a latency (a joiner's zero-time
// re-acquire raced the holder's release: a join took 0 s or 1 s by the
// toss; see busLatency).
var replaySeeds = []uint64{7, 2001, 2019}

// TestSimulationReplays runs each of replaySeeds twice: the traces must
// match line for line. (Result.Scripts may differ: the waits of one server
// on one holder wake at one instant by design, and which of them reads the
// holder's presence first, the others sharing its reading, is the
// scheduler's choice; one that comes first may try one acquire more.)
func TestSimulationReplays(t *testing.T) {
	for _, seed := range replaySeeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			var traces [2][]string
			for i := range traces {
				synctest.Test(t, func(t *testing.T) {
					res := simulation.Run(t, simulation.ShortConfig(seed))
					if res.Failure != nil {
						t.Fatalf("seed %d: %v", seed, res.Failure)
					}
					traces[i] = res.Trace
				})
			}
			for i := range min(len(traces[0]), len(traces[1])) {
				if traces[0][i] != traces[1][i] {
					t.Fatalf("seed %d: the replay differs at line %d:\n  first:  %s\n  replay: %s\ncontext:\n%s", seed, i,
						traces[0][i], traces[1][i], strings.Join(traces[0][max(0, i-10):i], "\n"))
				}
			}
			if len(traces[0]) != len(traces[1]) {
				t.Fatalf("seed %d: the replay has %d lines, the first run %d", seed, len(traces[1]), len(traces[0]))
			}
		})
	}
}
