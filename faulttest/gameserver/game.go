package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/faulttest"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

const (
	// closeWithin bounds Node.Close on SIGTERM.
	closeWithin = 15 * time.Second
	// lockReadWithin bounds the read of a new lock's lock.at.
	lockReadWithin = 2 * time.Second
	// defaultSaveBound bounds a Save when -save-timeout is unset (the
	// library's own SaveTimeout default).
	defaultSaveBound = defaults.SaveTimeout
)

// game is one server: its Node, its driver, and the state of every key.
type game struct {
	cfg     config
	out     *emitter
	log     *slog.Logger
	rdb     *redis.Client
	nc      *nats.Conn // nil without a bus
	node    *datadriver.Node
	players *datadriver.Driver[faulttest.Player]
	sem     chan struct{} // join slots

	mu   sync.Mutex
	keys map[string]*faulttest.KeyState
	// live are the sessions playing now (the "move" command moves them).
	live map[string]*datadriver.Profile[faulttest.Player]
}

// newGame connects to Redis (and NATS) and starts the Node and its driver.
func newGame(ctx context.Context, cfg config, stdout, stderr io.Writer) (*game, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	g := &game{
		cfg:  cfg,
		out:  &emitter{w: stdout, job: cfg.job},
		log:  log,
		sem:  make(chan struct{}, cfg.concurrency),
		keys: make(map[string]*faulttest.KeyState, cfg.count),
		live: make(map[string]*datadriver.Profile[faulttest.Player]),
	}
	conns, err := openNode(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	g.rdb, g.nc, g.node = conns.rdb, conns.nc, conns.node
	dcfg := datadriver.Config[faulttest.Player]{
		Name:     cfg.driver,
		LockWait: cfg.lockWait,
		Autosave: -1, // the play loop saves, so every saved value is known exactly
		Kick: func(key string, r datadriver.KickReason) {
			g.out.emit(faulttest.Event{Ev: faulttest.EvKicked, Key: key, Reason: r.String()})
		},
	}
	if cfg.messages {
		dcfg.OnMessage = g.onMessage
	}
	g.players, err = datadriver.NewDriver(g.node, dcfg)
	if err != nil {
		conns.close(ctx)
		return nil, fmt.Errorf("new driver: %w", err)
	}
	for _, k := range cfg.keys() {
		g.keys[k] = &faulttest.KeyState{Key: k}
	}
	return g, nil
}

func (g *game) closeConns() { conns{rdb: g.rdb, nc: g.nc}.closeClients() }

// run plays every key until ctx ends, answering commands; then it closes the
// Node and waits for every key's loop.
func (g *game) run(ctx context.Context, cmds <-chan string) error {
	g.out.emit(faulttest.Event{Ev: faulttest.EvReady})
	play, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	startKeys := func() {
		for _, k := range g.cfg.keys() {
			wg.Go(func() { g.keyLoop(play, k) })
		}
	}
	if !g.cfg.waitStart {
		startKeys()
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case c := <-cmds:
			switch {
			case c == "dump":
				g.dump()
			case c == "start" && g.cfg.waitStart:
				g.cfg.waitStart = false
				startKeys()
			case strings.HasPrefix(c, "move "):
				g.moveAll(play, strings.TrimPrefix(c, "move "), &wg)
			default:
				g.log.Warn("unknown command", "cmd", c)
			}
		}
	}
	stop()
	cctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	err := g.node.Close(cctx)
	g.out.emit(faulttest.Event{Ev: faulttest.EvClosed, Err: errText(err)})
	wg.Wait()
	g.closeConns()
	return err
}

// keyLoop joins key and plays it, again after -rejoin when the session
// ends or the join fails, until ctx ends.
func (g *game) keyLoop(ctx context.Context, key string) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			if g.cfg.rejoin <= 0 {
				return
			}
			t := time.NewTimer(g.cfg.rejoin)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if p := g.join(ctx, key); p != nil {
			g.play(ctx, key, p)
		}
	}
}

// join runs one Join in a join slot and reports it; nil when it failed.
func (g *game) join(ctx context.Context, key string) *datadriver.Profile[faulttest.Player] {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	defer func() { <-g.sem }()
	start := time.Now()
	g.out.emit(faulttest.Event{Ev: faulttest.EvJoinStart, Key: key})
	p, err := g.players.Join(ctx, key)
	took := time.Since(start)
	if err != nil {
		if ctx.Err() == nil {
			g.out.emit(faulttest.Event{Ev: faulttest.EvJoinFailed, Key: key, Err: err.Error(),
				Sent: start.UnixNano(), JoinNS: int64(took)})
		}
		return nil
	}
	epoch := p.Epoch()
	var coins int
	p.View(func(d *faulttest.Player) { coins = d.Coins })
	lockAt := g.lockAt(ctx, key, epoch)
	p.OnRelease(func(*faulttest.Player) {
		g.out.emit(faulttest.Event{Ev: faulttest.EvOnRelease, Key: key, Epoch: epoch})
		if g.cfg.releaseDelay > 0 {
			time.Sleep(g.cfg.releaseDelay) // the game's leave work
		}
	})
	g.mu.Lock()
	ks := g.keys[key]
	ks.Sessions++
	ks.Live, ks.Epoch, ks.Coins = true, epoch, coins
	g.mu.Unlock()
	g.out.emit(faulttest.Event{Ev: faulttest.EvJoined, Key: key, Epoch: epoch, Coins: coins,
		Sent: start.UnixNano(), JoinNS: int64(took), LockAtMS: lockAt})
	return p
}

// lockAt reads the record's lock.at: the Redis time the acquire landed, as
// long as no save of ours has refreshed it (autosave is off and the play
// loop has not started). 0 when the read fails or the lock is not this
// session's.
func (g *game) lockAt(ctx context.Context, key string, epoch int64) int64 {
	ctx, cancel := context.WithTimeout(ctx, lockReadWithin)
	defer cancel()
	f, err := g.rdb.HMGet(ctx, record.Key(g.cfg.ns, g.cfg.driver, key), "lock.at", "lock.job", "epoch").Result()
	if err != nil || len(f) != 3 {
		return 0
	}
	at, job, ep := str(f[0]), str(f[1]), str(f[2])
	if job != g.cfg.job || ep != strconv.FormatInt(epoch, 10) {
		return 0
	}
	ms, _ := strconv.ParseInt(at, 10, 64)
	return ms
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// session is the play of one joined profile.
type session struct {
	mu                    sync.Mutex
	updates               int64
	lastBefore, lastAfter time.Time
}

// stamp copies the session's last accepted Update into e.
func (s *session) stamp(e *faulttest.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Updates = s.updates
	if s.updates > 0 {
		e.LastBefore, e.LastAfter = s.lastBefore.UnixNano(), s.lastAfter.UnixNano()
	}
}

// play runs the session's loop: an Update every -update, a Save every
// -save, in one goroutine so the value each Save writes is known exactly.
// It returns when an Update is refused (after Done has closed) or ctx ends.
// A watcher reports Done the moment it closes, even while a Save hangs.
func (g *game) play(ctx context.Context, key string, p *datadriver.Profile[faulttest.Player]) {
	s := &session{}
	epoch := p.Epoch()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-p.Done():
		case <-ctx.Done():
			return
		}
		e := faulttest.Event{Ev: faulttest.EvEnded, Key: key, Epoch: epoch, Err: errText(p.Err())}
		s.stamp(&e)
		g.mu.Lock()
		g.keys[key].Live = false
		g.mu.Unlock()
		g.out.emit(e)
	}()
	defer func() { <-watched }()
	g.mu.Lock()
	g.live[key] = p
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.live[key] == p {
			delete(g.live, key)
		}
		g.mu.Unlock()
	}()

	tick := time.NewTicker(g.cfg.update)
	defer tick.Stop()
	lastSave := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		before := time.Now()
		var coins int
		err := p.Update(func(d *faulttest.Player) {
			d.Coins++
			d.Writer, d.Epoch = g.cfg.job, epoch
			coins = d.Coins
		})
		after := time.Now()
		if err != nil {
			e := faulttest.Event{Ev: faulttest.EvRefused, Key: key, Epoch: epoch, Err: err.Error(), Sent: before.UnixNano()}
			s.stamp(&e)
			g.out.emit(e)
			select { // the session is over: wait for the watcher's report
			case <-watched:
			case <-ctx.Done():
			}
			return
		}
		s.mu.Lock()
		s.updates++
		s.lastBefore, s.lastAfter = before, after
		s.mu.Unlock()
		g.mu.Lock()
		ks := g.keys[key]
		ks.Updates++
		ks.Coins, ks.LastBefore, ks.LastAfter = coins, before.UnixNano(), after.UnixNano()
		g.mu.Unlock()
		if g.cfg.logUpdates {
			g.out.emit(faulttest.Event{T: after.UnixNano(), Ev: faulttest.EvUpdate, Key: key, Epoch: epoch,
				Coins: coins, Sent: before.UnixNano()})
		}
		if time.Since(lastSave) >= g.cfg.save {
			g.save(ctx, key, epoch, coins, p)
			lastSave = time.Now()
		}
	}
}

// save runs one Save of the value coins and reports it.
func (g *game) save(ctx context.Context, key string, epoch int64, coins int, p *datadriver.Profile[faulttest.Player]) {
	bound := g.cfg.saveTimeout
	if bound <= 0 {
		bound = defaultSaveBound
	}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	sent := time.Now()
	err := p.Save(sctx)
	switch {
	case err == nil:
		g.out.emit(faulttest.Event{Ev: faulttest.EvSaved, Key: key, Epoch: epoch, Coins: coins, Sent: sent.UnixNano()})
	case ctx.Err() == nil:
		g.out.emit(faulttest.Event{Ev: faulttest.EvSaveFailed, Key: key, Epoch: epoch, Err: err.Error(), Sent: sent.UnixNano()})
	}
}

// onMessage is the driver's OnMessage with -messages: it applies a Gift
// and reports it. A body that is not a Gift is refused (it stays in the
// inbox).
func (g *game) onMessage(d *faulttest.Player, m datadriver.Message) error {
	if g.cfg.applyDelay > 0 {
		time.Sleep(g.cfg.applyDelay) // the messages of a pull applied before this one wait for its save meanwhile
	}
	var gift faulttest.Gift
	if err := m.Decode(&gift); err != nil {
		return fmt.Errorf("decode gift %s: %w", m.ID, err)
	}
	d.ApplyGift(m.ID, gift)
	g.out.emit(faulttest.Event{Ev: faulttest.EvApplied, Key: gift.Key, Msg: m.ID, Seq: gift.Seq})
	return nil
}

// dump prints every key's state, sorted by key.
func (g *game) dump() {
	g.mu.Lock()
	keys := make([]faulttest.KeyState, 0, len(g.keys))
	for _, ks := range g.keys {
		keys = append(keys, *ks)
	}
	g.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	g.out.emit(faulttest.Event{Ev: faulttest.EvDump, Keys: keys})
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// emitter prints events as JSON lines, one write per line.
type emitter struct {
	mu  sync.Mutex
	w   io.Writer
	job string
	err error // the first write error; later events are dropped
}

// emit stamps e with the job and, unless set, the current time, and prints it.
func (e *emitter) emit(ev faulttest.Event) {
	ev.Job = e.job
	if ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("gameserver: encode event: %v", err)) // a bug: Event always encodes
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}
