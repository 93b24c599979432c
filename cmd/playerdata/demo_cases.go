package main

// The demo's four cases. Each runs two real Nodes, "A" and "B", with their
// own Redis clients and NATS connections, and plays the real protocol: the
// faults are go-redis hooks on A's client, nothing else is faked.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/labenv"
	"github.com/ckernel/playerdata/internal/record"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// demoDriver is the name of the demo's profile driver.
const demoDriver = "PlayerData"

// Outcomes of B's join.
const (
	outcomeLoaded  = "loaded"
	outcomeRefused = "refused"
)

// Faults injected by the demo's hooks.
var (
	errLeaveSaveRefused = errors.New("injected fault: Redis refused the call")
	errKilled           = errors.New("injected fault: server A was killed")
)

// player is the demo's profile.
type player struct {
	Coins    int      `msgpack:"coins"`
	Items    []string `msgpack:"items"`
	LeftFrom string   `msgpack:"left_from,omitempty"` // set by the leave cleanup
}

// String describes the profile in a timeline.
func (p player) String() string {
	s := fmt.Sprintf("coins %d", p.Coins)
	if len(p.Items) > 0 {
		s += ", items " + strings.Join(p.Items, "+")
	}
	if p.LeftFrom != "" {
		s += ", left from " + p.LeftFrom
	}
	return s
}

// caseDef is one case of the demo.
type caseDef struct {
	name    string
	title   string // what happens, in one line
	key     string // the player's profile key
	promise string // what the reference design promises
	expect  string // B's outcome the design says
	// timed: the case waits on the handoff timers (presence expiry,
	// LockWait) and plays at --speed; the others play at speed 1.
	timed bool
	// within says whether a wait, scaled to real timings, keeps the promise.
	within func(scaled time.Duration) bool
	play   func(ctx context.Context, c *caseRun) error
}

// demoCases returns the four cases, in the order they are played.
func demoCases() []*caseDef {
	aboutOneSave := func(scaled time.Duration) bool { return scaled <= time.Second }
	return []*caseDef{{
		name:    "stale-connection",
		title:   "A still has the player connected; A ends that session, saves, replies",
		key:     "user:101",
		promise: "about one save",
		expect:  outcomeLoaded,
		within:  aboutOneSave,
		play:    playStaleConnection,
	}, {
		name:    "failed-leave-save",
		title:   "A's leave save failed; A retries the release at once and replies",
		key:     "user:102",
		promise: "about one save",
		expect:  outcomeLoaded,
		within:  aboutOneSave,
		play:    playFailedLeaveSave,
	}, {
		name:    "crash",
		title:   "A stops without releasing; B takes over once A's presence has expired",
		key:     "user:103",
		promise: "10 to 15 s",
		expect:  outcomeLoaded,
		timed:   true,
		// 10 to 15 s, with a second of slack for measuring at a high speed.
		within: func(s time.Duration) bool { return s >= 9*time.Second && s <= 16*time.Second },
		play:   playCrash,
	}, {
		name:    "stalling-holder",
		title:   "A is alive but its saves stall; A keeps the lock and B's join fails closed after LockWait",
		key:     "user:104",
		promise: "kick after LockWait (15 s)",
		expect:  outcomeRefused,
		timed:   true,
		within: func(s time.Duration) bool {
			return s >= defaults.LockWait && s <= defaults.LockWait+3*time.Second
		},
		play: playStallingHolder,
	}}
}

// timings are the handoff timings of a case: the reference design's,
// divided by speed.
type timings struct {
	speed                                         float64
	beat, ttl, repeat, parkMin, parkMax, lockWait time.Duration
}

// timingsAt divides the reference timings by speed.
func timingsAt(speed float64) timings {
	div := func(d time.Duration) time.Duration { return time.Duration(float64(d) / speed) }
	return timings{
		speed:    speed,
		beat:     div(presencecore.DefaultBeat),
		ttl:      div(presencecore.DefaultTTL),
		repeat:   div(handoffcore.DefaultRequestRepeat),
		parkMin:  div(handoffcore.DefaultParkMin),
		parkMax:  div(handoffcore.DefaultParkMax),
		lockWait: div(defaults.LockWait),
	}
}

// String lists the timings for the case's settings line.
func (t timings) String() string {
	return fmt.Sprintf("beat %s, presence TTL %s, request every %s, park %s doubling to %s, LockWait %s",
		human(t.beat), human(t.ttl), human(t.repeat), human(t.parkMin), human(t.parkMax), human(t.lockWait))
}

// caseRun is one case being played.
type caseRun struct {
	env     *labenv.Env
	ns      string // the case's own namespace: no case meets what another left
	def     *caseDef
	t       timings
	tl      *timeline
	servers []*demoServer
	extra   string // more settings, said under the title
	key     string // the RequestKey A and B share

	// Set by the play function.
	outcome string
	wait    time.Duration
	dataOK  bool
	joinErr error
}

// playCase plays def and returns its result. An error means the case could
// not be played (a server unreachable, ctx cancelled), not that the
// protocol misbehaved: that shows in the result.
func playCase(ctx context.Context, env *labenv.Env, def *caseDef, speed float64, raw io.Writer, once *onceNotes) (caseResult, error) {
	if !def.timed {
		speed = 1
	}
	c := &caseRun{env: env, ns: caseNamespace(env, def), def: def, t: timingsAt(speed), tl: newTimeline(raw, once),
		key: rand.Text()} // the servers sign their messages, as a deployment's should
	ctx, cancel := context.WithTimeout(ctx, 4*c.t.lockWait+30*time.Second)
	defer cancel()
	err := def.play(ctx, c)
	c.closeServers(ctx)
	if err != nil {
		return caseResult{}, err
	}
	if c.outcome == "" {
		return caseResult{}, errors.New("server B's join did not run")
	}
	settings := "speed 1: real timings (nothing in this case waits on a timer)"
	if def.timed {
		settings = fmt.Sprintf("speed %s: %s", fmtSpeed(speed), c.t)
	}
	if c.extra != "" {
		settings += "\n  " + c.extra
	}
	scaled := time.Duration(float64(c.wait) * speed)
	evs := c.tl.list()
	r := caseResult{
		Case:          def.name,
		Outcome:       c.outcome,
		WaitMS:        ms(c.wait),
		Speed:         speed,
		ScaledWaitMS:  math.Round(ms(c.wait)*speed*100) / 100,
		DataOK:        c.dataOK,
		Promise:       def.promise,
		WithinPromise: c.outcome == def.expect && def.within(scaled),
		Timeline:      toJSON(evs),
		events:        evs,
		settings:      settings,
	}
	if c.joinErr != nil {
		r.Error = c.joinErr.Error()
	}
	return r, nil
}

// caseNamespace is the namespace of case def: "<run's namespace>:<case>",
// so that a case meets no presence beat or record another case left (the
// crash case's A dies beating), and the run's clean-up deletes it.
func caseNamespace(env *labenv.Env, def *caseDef) string { return env.Namespace + ":" + def.name }

// demoServer is one game server of a case: a Node with its own Redis
// client (and fault hook), NATS connection and player driver.
type demoServer struct {
	name    string
	rdb     *redis.Client
	hook    *faultHook
	nc      *nats.Conn
	node    *datadriver.Node
	players *datadriver.Driver[player]
	beat    atomic.Int64 // unix ns of the last presence beat sent; 0: none
	// kicked gets each Kick the game received (the library calls Kick on
	// a goroutine of its own, so a case that shows one waits for it).
	kicked chan struct{}
}

// lastBeat is when the server's last presence beat went out (zero: none).
func (s *demoServer) lastBeat() time.Time {
	if ns := s.beat.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// newServer starts server name with the case's timings; tweak changes its
// configuration first.
func (c *caseRun) newServer(ctx context.Context, name string, tweak func(*datadriver.NodeConfig, *datadriver.Config[player])) (*demoServer, error) {
	s := &demoServer{name: name, rdb: redis.NewClient(c.env.RedisOptions()), kicked: make(chan struct{}, 16)}
	presKey := presencecore.KeyFor(c.ns)
	s.hook = newFaultHook(func(cmd redis.Cmder) {
		if isBeat(cmd, presKey, name) {
			s.beat.Store(time.Now().UnixNano())
		}
	})
	s.rdb.AddHook(s.hook)
	c.servers = append(c.servers, s) // closed at the end of the case, however far it got
	var err error
	if s.nc, err = connectNATS(c.env.NATSURL, "playerdata demo "+name); err != nil {
		return nil, err
	}
	t := c.t
	ncfg := datadriver.NodeConfig{
		JobID: name, Redis: s.rdb, NATS: s.nc, Namespace: c.ns, Logger: c.tl.logger(name),
		Beat: t.beat, PresenceTTL: t.ttl, FenceMargin: t.beat,
		RequestRepeat: t.repeat, ParkMin: t.parkMin, ParkMax: t.parkMax, RequestKey: []byte(c.key),
	}
	dcfg := datadriver.Config[player]{
		Name:     demoDriver,
		Defaults: player{Coins: 100},
		LockWait: t.lockWait,
		Autosave: -1, // only the saves the case makes land
		Kick: func(key string, reason datadriver.KickReason) {
			c.tl.add(name, kindBad, fmt.Sprintf("Kick(%s, %s): the game disconnects the player: %q", key, reason, reason.Message()))
			select {
			case s.kicked <- struct{}{}:
			default:
			}
		},
	}
	if tweak != nil {
		tweak(&ncfg, &dcfg)
	}
	if s.node, err = datadriver.NewNode(ctx, ncfg); err != nil {
		return nil, fmt.Errorf("start server %s: %w", name, err)
	}
	if s.players, err = datadriver.NewDriver(s.node, dcfg); err != nil {
		return nil, fmt.Errorf("start server %s: %w", name, err)
	}
	return s, nil
}

// twoServers starts A and B with the same tweak.
func (c *caseRun) twoServers(ctx context.Context, tweak func(*datadriver.NodeConfig, *datadriver.Config[player])) (a, b *demoServer, err error) {
	if a, err = c.newServer(ctx, "A", tweak); err != nil {
		return nil, nil, err
	}
	if b, err = c.newServer(ctx, "B", tweak); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// closeServers closes every server of the case, its faults removed first;
// nothing of it goes into the timeline.
func (c *caseRun) closeServers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	for _, s := range c.servers {
		c.tl.mute(s.name)
	}
	var wg sync.WaitGroup
	for _, s := range c.servers {
		wg.Go(func() {
			s.hook.set(nil)
			if s.node != nil {
				_ = s.node.Close(ctx)
			}
			if s.nc != nil {
				s.nc.Close()
			}
			_ = s.rdb.Close()
		})
	}
	wg.Wait()
}

// joinA is the player's session on A, before the case begins.
func (c *caseRun) joinA(ctx context.Context, a *demoServer) (*datadriver.Profile[player], error) {
	p, err := a.players.Join(ctx, c.def.key)
	if err != nil {
		return nil, fmt.Errorf("server A's join: %w", err)
	}
	c.tl.add("A", kindAction, fmt.Sprintf("player joins: Join(%q) loaded %s, lock epoch %d", c.def.key, snapshot(p), p.Epoch()))
	return p, nil
}

// joinB is the join the case is about: it records B's outcome and wait.
func (c *caseRun) joinB(ctx context.Context, b *demoServer) (*datadriver.Profile[player], error) {
	c.tl.add("B", kindAction, fmt.Sprintf("player joins B: Join(%q) called", c.def.key))
	start := time.Now()
	p, err := b.players.Join(ctx, c.def.key)
	c.wait = time.Since(start)
	switch {
	case err == nil:
		c.outcome = outcomeLoaded
		c.tl.add("B", kindGood, fmt.Sprintf("Join returned after %s: loaded %s, lock epoch %d", human(c.wait), snapshot(p), p.Epoch()))
		return p, nil
	case errors.Is(err, datadriver.ErrWaitTimeout):
		c.outcome, c.joinErr = outcomeRefused, err
		c.tl.add("B", kindBad, fmt.Sprintf("Join failed closed after %s with ErrWaitTimeout: %s; the game refuses the session",
			human(c.wait), lockedText(err)))
		return nil, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	c.outcome, c.joinErr = outcomeRefused, err
	c.tl.add("B", kindBad, "Join failed: "+err.Error())
	return nil, nil
}

// lockedText describes the lock a refused join met.
func lockedText(err error) string {
	var le *datadriver.LockedError
	if !errors.As(err, &le) {
		return err.Error()
	}
	flag := "no presence flag"
	if le.Presence {
		flag = "presence flag set"
	}
	return fmt.Sprintf("%s holds the lock (age %s, %s)", le.Holder, human(le.Age), flag)
}

// waitKick waits (at most closeTimeout) for s's game to be told to kick
// its player, so that the case's timeline holds the Kick the library
// delivers on a goroutine of its own.
func waitKick(ctx context.Context, s *demoServer) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	select {
	case <-s.kicked:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server %s's game was never told to kick its player", s.name)
	}
}

// snapshot copies a profile's data.
func snapshot(p *datadriver.Profile[player]) player {
	var v player
	p.View(func(d *player) {
		v = *d
		v.Items = slices.Clone(d.Items)
	})
	return v
}

// waitDone waits until A's profile has ended (its release landed).
func waitDone(ctx context.Context, p *datadriver.Profile[player]) error {
	select {
	case <-p.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server A's profile did not end: %w", ctx.Err())
	}
}

// checkSameData records whether B got exactly what A's last landed save
// wrote (want).
func (c *caseRun) checkSameData(want player, pb *datadriver.Profile[player]) {
	got := snapshot(pb)
	c.dataOK = reflect.DeepEqual(got, want)
	if c.dataOK {
		c.tl.add("B", kindGood, fmt.Sprintf("B has A's latest landed save: %s", got))
	} else {
		c.tl.add("B", kindBad, fmt.Sprintf("B has %s, but A's latest landed save is %s", got, want))
	}
}

// playStaleConnection: the player is still connected to A when they join B.
func playStaleConnection(ctx context.Context, c *caseRun) error {
	a, b, err := c.twoServers(ctx, nil)
	if err != nil {
		return err
	}
	pa, err := c.joinA(ctx, a)
	if err != nil {
		return err
	}
	_ = pa.Update(func(d *player) { d.Coins += 150; d.Items = append(d.Items, "dragon-scale") })
	pa.OnRelease(func(d *player) { d.LeftFrom = "A" })
	c.tl.add("A", kindNote, fmt.Sprintf("player plays: %s, not saved yet (a leave cleanup will mark the profile)", snapshot(pa)))

	pb, err := c.joinB(ctx, b)
	if pb == nil || err != nil {
		return err
	}
	if err := waitDone(ctx, pa); err != nil {
		return err
	}
	if err := waitKick(ctx, a); err != nil {
		return err
	}
	want := snapshot(pa) // what A's release save wrote
	c.checkSameData(want, pb)
	c.dataOK = c.dataOK && want.Coins == 250 && want.LeftFrom == "A" && errors.Is(pa.Err(), datadriver.ErrReleased)
	return nil
}

// playFailedLeaveSave: the player left A, whose leave save failed; the
// profile is retained on A under its lock when they join B.
func playFailedLeaveSave(ctx context.Context, c *caseRun) error {
	a, b, err := c.twoServers(ctx, nil)
	if err != nil {
		return err
	}
	pa, err := c.joinA(ctx, a)
	if err != nil {
		return err
	}
	_ = pa.Update(func(d *player) { d.Coins += 75; d.Items = append(d.Items, "silver-key") })
	c.tl.add("A", kindNote, fmt.Sprintf("player plays: %s, not saved yet", snapshot(pa)))

	// A's Redis refuses its release saves until the player joins B: the
	// leave save fails, and so would a background retry of it.
	var refusing atomic.Bool
	refusing.Store(true)
	a.hook.set(func(_ context.Context, cmd redis.Cmder) error {
		if mode, ok := saveScriptMode(cmd); ok && mode == record.ModeRelease && refusing.Load() {
			return errLeaveSaveRefused
		}
		return nil
	})
	c.tl.add("A", kindAction, "player leaves A: Release called (the demo's hook makes A's release saves fail until the player joins B)")
	if err := pa.Release(ctx); err == nil {
		return errors.New("server A's leave save landed; the injected failure did not happen")
	}
	refusing.Store(false)

	pb, err := c.joinB(ctx, b)
	if pb == nil || err != nil {
		return err
	}
	if err := waitDone(ctx, pa); err != nil {
		return err
	}
	c.checkSameData(snapshot(pa), pb)
	c.dataOK = c.dataOK && snapshot(pb).Coins == 175 && errors.Is(pa.Err(), datadriver.ErrReleased)
	return nil
}
