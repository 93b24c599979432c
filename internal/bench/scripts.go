package bench

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

// Scripts are the average server-side times of our scripts, in µs: INFO
// commandstats deltas (cmdstat_evalsha usec ÷ calls) over phases that each
// run one script only, one call at a time, on records in their steady state
// (created, saved and released once, so no history version is due).
type Scripts struct {
	// EvalSHA is the mean of every EVALSHA of ours' measured cycle rounds,
	// at every concurrency.
	EvalSHA float64 `json:"evalsha"`
	// Acquire is acquire.lua (Driver.Load of a free record with 512 bytes of
	// data), Save save.lua in save mode, Release save.lua in release mode
	// (data written and lock cleared), Send send.lua.
	Acquire float64 `json:"acquire"`
	Save    float64 `json:"save"`
	Release float64 `json:"release"`
	Send    float64 `json:"send"`
	// Trivial is "return 1": what any script call costs. Floor is the
	// least a fenced write can do in one script, on the same records: TIME,
	// an HMGET of the lock token, ver and data, an HSET of the same 512
	// bytes with ver and lock.at (floorScript).
	Trivial float64 `json:"trivial"`
	Floor   float64 `json:"floor"`
	// Calls is how many calls each phase made.
	Calls int `json:"calls"`
	// InnerUS is, per script, the time of the Redis commands it runs
	// (their commandstats usec); the rest of the script's time is Lua and
	// the call itself. Commands is how many commands it runs per call.
	InnerUS  map[string]float64 `json:"inner_us"`
	Commands map[string]float64 `json:"commands"`
}

// trivialScript is the floor of a script call.
var trivialScript = redis.NewScript("return 1")

// floorScript is the floor of a fenced write (Scripts.Floor): the Redis
// clock, the lock's fields and the data read, the data written back.
var floorScript = redis.NewScript(`local t = redis.call('TIME')
local f = redis.call('HMGET', KEYS[1], 'lock.token', 'ver', 'data')
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'ver', ARGV[2], 'lock.at', t[1])
return 1`)

// runScripts fills Result.Scripts (its EvalSHA is the cycle's).
func (r *runner) runScripts(ctx context.Context) error {
	s := &r.res.Scripts
	s.Calls = r.cfg.ScriptCalls
	s.InnerUS, s.Commands = map[string]float64{}, map[string]float64{}
	if !r.stats {
		return nil // nothing to read the times from
	}
	ns := r.ns("scripts")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	rdb := r.client(0)
	defer func() { _ = rdb.Close() }()
	drv, closeNode, err := r.benchDriver(ctx, rdb, ns)
	if err != nil {
		return err
	}
	defer closeNode()
	blob := newBlob(r.cfg.CycleDataBytes, rand.NewChaCha8([32]byte{2}))
	n := r.cfg.ScriptCalls
	setup := oursCycle(drv, blob)
	for w := range n {
		if err := setup(ctx, w, 0); err != nil {
			return fmt.Errorf("set up: %w", err)
		}
		if err := floorScript.Run(ctx, rdb, []string{ns + ":floor:" + playerKey(w)}, blob, w).Err(); err != nil {
			return fmt.Errorf("set up the floor: %w", err)
		}
	}

	profiles := make([]*datadriver.Profile[profileData], n)
	phases := []struct {
		name string
		us   *float64 // where the phase's mean goes
		call func(w int) error
	}{
		{"acquire", &s.Acquire, func(w int) (err error) {
			profiles[w], err = drv.Load(ctx, playerKey(w), datadriver.LoadOptions{})
			return err
		}},
		{"save", &s.Save, func(w int) error {
			if err := profiles[w].Update(func(d *profileData) { d.Coins++ }); err != nil {
				return err
			}
			return profiles[w].Save(ctx)
		}},
		{"release", &s.Release, func(w int) error {
			if err := profiles[w].Update(func(d *profileData) { d.Coins++ }); err != nil {
				return err
			}
			return profiles[w].Release(ctx)
		}},
		{"send", &s.Send, func(w int) error {
			_, err := drv.Send(ctx, playerKey(w), map[string]int{"gems": 5}, datadriver.SendOptions{})
			return err
		}},
		{"trivial", &s.Trivial, func(int) error { return trivialScript.Run(ctx, rdb, nil).Err() }},
		{"floor", &s.Floor, func(w int) error {
			return floorScript.Run(ctx, rdb, []string{ns + ":floor:" + playerKey(w)}, blob, w).Err()
		}},
	}
	for _, ph := range phases {
		d, err := r.measure(ctx, n, ph.call)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		sc, in := d.scriptCalls(), d.innerCalls()
		if sc.Calls == 0 {
			continue
		}
		*ph.us = round3(float64(sc.Usec) / float64(sc.Calls))
		s.InnerUS[ph.name] = round3(float64(in.Usec) / float64(sc.Calls))
		s.Commands[ph.name] = round3(float64(in.Calls) / float64(sc.Calls))
	}
	r.progress("  scripts (µs, server side): acquire %.1f, save %.1f, release %.1f, send %.1f, trivial %.1f, floor %.1f; cycle EVALSHA mean %.1f",
		s.Acquire, s.Save, s.Release, s.Send, s.Trivial, s.Floor, s.EvalSHA)
	return nil
}

// measure runs call for each of n players, one after another, and returns
// the server's work meanwhile.
func (r *runner) measure(ctx context.Context, n int, call func(w int) error) (serverDelta, error) {
	before := r.snapIf(ctx)
	for w := range n {
		if err := call(w); err != nil {
			return serverDelta{}, err
		}
	}
	return r.snapIf(ctx).since(before), nil
}

// benchDriver starts a Node on rdb under ns and its driver; closeNode
// closes the Node.
func (r *runner) benchDriver(ctx context.Context, rdb *redis.Client, ns string) (drv *datadriver.Driver[profileData], closeNode func(), err error) {
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "bench-" + randomID(), Redis: rdb, Namespace: ns, Logger: r.log})
	if err != nil {
		return nil, nil, err
	}
	closeNode = func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = node.Close(cctx)
	}
	if drv, err = datadriver.NewDriver(node, datadriver.Config[profileData]{Name: driverName}); err != nil {
		closeNode()
		return nil, nil, err
	}
	return drv, closeNode, nil
}
