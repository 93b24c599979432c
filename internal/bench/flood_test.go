package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/testsupport"
)

// floodGoroutines bounds how many goroutines a flood may add to the
// process: what the servers run anyway (a Node's loops, NATS and Redis
// connections) is in the quiet peak; the flood may add only the handoff's
// publish workers and one goroutine per release awaited, which the driver
// bounds (at most 256 give-backs of locks no session uses pending).
const floodGoroutines = 300

// orphanGiveBacksPerS is how many locks a driver gives back a second for
// requests naming a token it never issued (an earlier run's, or forged):
// each is a release, answered when it settles, so the forged requester gets
// these replies besides the one per window for locks not held at all.
const orphanGiveBacksPerS = 50

// A 20k msg/s flood on a real nats-server, against servers on a real
// redis-server, with and without RequestKey: no session ends, the
// goroutines stay bounded, the join waiting on a live holder runs at most
// twice the scripts it runs without the flood, and the forged requester
// gets at most one reply per reply window. It asserts bounds, not timing:
// the handoff latencies are the bench's.
func TestFloodBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of a few seconds per run")
	}
	rd, nt := testsupport.StartOwnRedis(t), testsupport.StartNATS(t)
	env := Env{RedisOptions: func() *redis.Options { return &redis.Options{Addr: rd.Addr} }, NATSURL: nt.URL, Namespace: rd.Namespace}
	r := &runner{env: env, log: slog.New(slog.DiscardHandler), res: &Result{}, admin: redis.NewClient(env.RedisOptions())}
	t.Cleanup(func() { _ = r.admin.Close() })
	rate := floodRate()
	for _, tc := range []struct {
		name string
		key  bool
	}{{"without RequestKey", false}, {"with RequestKey", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fr, err := r.floodRun(ctx, floodSpec{rate: rate, handoffs: 100, wait: 2 * time.Second, key: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", fr)
			if fr.PublishedPerS < float64(rate)/4 {
				t.Fatalf("the publisher reached %.0f msg/s of %d: no flood to judge by", fr.PublishedPerS, rate)
			}
			if fr.SessionsEnded != 0 {
				t.Errorf("the flood ended %d bystander sessions", fr.SessionsEnded)
			}
			if grew := fr.GoroutinesFlooded - fr.GoroutinesQuiet; grew > floodGoroutines {
				t.Errorf("goroutines peaked at %d under the flood, %d without: %d more, want at most %d",
					fr.GoroutinesFlooded, fr.GoroutinesQuiet, grew, floodGoroutines)
			}
			if fr.ScriptsWaitQuiet == 0 || fr.ScriptsWaitFlooded > 2*fr.ScriptsWaitQuiet {
				t.Errorf("the waiting join ran %d scripts under the flood, %d without: want at most twice",
					fr.ScriptsWaitFlooded, fr.ScriptsWaitQuiet)
			}
			windows := int(time.Duration(fr.FloodS*float64(time.Second))/handoffcore.DefaultParkMin) + 1
			giveBacks := int(fr.FloodS*orphanGiveBacksPerS) + orphanGiveBacksPerS // the rate, and the burst
			if fr.RepliesToForged > windows+giveBacks {
				t.Errorf("%d replies to the forged requester in %.1f s, want at most one per %v window (%d) and one per "+
					"give-back (%d)", fr.RepliesToForged, fr.FloodS, handoffcore.DefaultParkMin, windows, giveBacks)
			}
		})
	}
}
