package datadriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/deadlines"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// Driver loads and saves one kind of profile (T) on a Node. Create it with
// NewDriver; it lives until the Node is closed.
type Driver[T any] struct {
	node  *Node
	cfg   Config[T]
	codec *datacodec.Codec[T]
	// zenc and zdec compress kept versions (safe for concurrent use).
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	// tel records the driver's metrics and spans; unregTel stops its
	// profile gauge.
	tel      *telemetry.Driver
	unregTel func()
	log      *slog.Logger

	// loads is cancelled when the driver starts shutting down: loads waiting
	// on a lock give up. ctx is cancelled once it has released what it could:
	// every profile and background write stops.
	loads       context.Context
	cancelLoads context.CancelFunc
	ctx         context.Context
	cancel      context.CancelFunc
	// bg is ctx for the executors' own work (Profile.bg): its calls share
	// their SaveTimeout deadlines (bounds.go).
	bg context.Context
	// callbacks runs the game's Kick, OnLockLost and OnSaveError in order.
	callbacks *dispatcher
	// timers holds every profile's tick and age fence on one clock timer.
	timers *deadlines.Heap[Profile[T]]
	// base is the origin of its profiles' instants (instant.go).
	base time.Time
	// reader reads other servers' presence for Where (where.go).
	reader *presencecore.Presence
	// dig digests the data its profiles store (stored.go).
	dig digester

	// mu guards the driver's maps of keys and closed; a profile's life is
	// its executor's (life.go), never changed under mu but for its end.
	mu       sync.Mutex
	loading  map[string]bool          // keys with a load in flight on this Node (the reservation)
	profiles map[string]*Profile[T]   // live, leaving and retained profiles
	waits    map[string]chan struct{} // closed when a key's local state changes
	// loadRequests are release requests for keys still loading.
	loadRequests map[string][]loadRequest
	// orphans gives back locks that release requests name and no session
	// uses (orphans.go).
	orphans *orphans
	// moves are the profiles moved here and not joined yet (move_target.go).
	moves  movesIn[T]
	closed bool
	wg     sync.WaitGroup // loads, profiles' executors (drains) and background writes
	// execMu orders the start of a drain (spawn) before shutdown's wait:
	// once execClosed is set no drain starts.
	execMu     sync.RWMutex
	execClosed bool
	// ticks are the profiles' ticks waiting for a tick worker (tickpool.go).
	ticks tickQueue[T]
	// lastSessions is the session count last taken (sessions.go).
	lastSessions atomic.Int64
}

// NewDriver creates the driver for profiles of type T on node. The name
// must be unique on the Node (ErrDuplicateDriver) and T's Defaults must
// encode with msgpack.
func NewDriver[T any](node *Node, cfg Config[T]) (*Driver[T], error) {
	if node == nil {
		return nil, fmt.Errorf("%w: nil Node", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newCodec(cfg)
	if err != nil {
		return nil, err
	}
	reader, err := newReader(node)
	if err != nil {
		return nil, fmt.Errorf("new driver: %w", err)
	}
	zenc, zdec, err := newZstd()
	if err != nil {
		return nil, fmt.Errorf("new driver: %w", err)
	}
	d := &Driver[T]{
		node:         node,
		dig:          newDigester(),
		cfg:          cfg,
		codec:        c,
		zenc:         zenc,
		zdec:         zdec,
		tel:          node.tel.Driver(cfg.Name),
		log:          node.log.With("driver", cfg.Name),
		loading:      make(map[string]bool),
		profiles:     make(map[string]*Profile[T]),
		waits:        make(map[string]chan struct{}),
		loadRequests: make(map[string][]loadRequest),
		orphans:      newOrphans(node.clock),
		callbacks:    newDispatcher(),
		timers:       deadlines.New(node.clock, (*Profile[T]).deadline, (*Profile[T]).timerFired),
		base:         node.clock.Now(),
		reader:       reader,
	}
	d.ctx, d.cancel = context.WithCancel(node.ctx)
	d.loads, d.cancelLoads = context.WithCancel(d.ctx)
	d.bg = sharesBounds(d.ctx)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.runOrphans()
	}()
	d.unregTel = d.tel.RegisterProfiles(d.profileCounts)
	if err := node.register(cfg.Name, d); err != nil {
		d.stop()
		return nil, fmt.Errorf("new driver: %w", err)
	}
	if !cfg.noHandoff {
		if err := node.handoff.Register(cfg.Name, handoffcore.Handlers{Release: d.releaseFor, Notify: d.onNotify}); err != nil {
			node.unregister(cfg.Name)
			d.stop()
			return nil, fmt.Errorf("new driver: %w: %w", ErrDuplicateDriver, err)
		}
	}
	return d, nil
}

// stop cancels the driver's context, drains its callbacks and frees its
// compressors and its gauge.
func (d *Driver[T]) stop() {
	d.cancel()
	d.node.bounds.forget(d.ctx)
	d.timers.Close()
	d.callbacks.close()
	d.unregTel()
	_ = d.zenc.Close()
	d.zdec.Close()
}

// Name is the driver's name.
func (d *Driver[T]) Name() string { return d.cfg.Name }

// Node is the Node the driver runs on.
func (d *Driver[T]) Node() *Node { return d.node }

// recordKey is the Redis key of key's record.
func (d *Driver[T]) recordKey(key string) string {
	return record.Key(d.node.ns, d.cfg.Name, key)
}

// goTracked runs f on a goroutine the driver waits for at shutdown. It
// reports false when the driver is closed (f does not run). d.mu must be
// held.
func (d *Driver[T]) goTracked(f func()) bool {
	if d.closed {
		return false
	}
	d.goCounted(f)
	return true
}

// goCounted runs f on a goroutine counted in d.wg. The caller makes sure
// shutdown's d.wg.Wait has not begun (d.closed or d.execClosed unset under
// their lock).
func (d *Driver[T]) goCounted(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// track counts a load, so that shutdown waits for it; false when the
// driver is closed. The caller calls d.wg.Done.
func (d *Driver[T]) track() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	return true
}

// shutdown releases every profile and waits for the driver's goroutines.
func (d *Driver[T]) shutdown(ctx context.Context) error {
	d.mu.Lock()
	profiles := make([]*Profile[T], 0, len(d.profiles))
	for _, p := range d.profiles {
		profiles = append(profiles, p)
	}
	d.closed = true
	d.mu.Unlock()
	d.cancelLoads() // loads waiting on locks give up
	d.node.bounds.forget(d.loads)

	var wg sync.WaitGroup
	errs := make([]error, len(profiles))
	for i, p := range profiles {
		wg.Go(func() {
			// Kick says shutdown: the game can send the player elsewhere.
			if err := p.do(ctx, p.leaveAndRelease(causeShutdown)); err != nil && !errors.Is(err, ErrReleased) && !errors.Is(err, ErrLockLost) {
				errs[i] = err
				d.log.Error("shutdown: could not save and release a profile in time; its lock stays until this "+
					"server's presence expires", "key", p.key, "err", err)
			}
		})
	}
	wg.Wait()
	d.settleMoves(ctx) // the moves pending here: a flip that landed is given back
	// A profile whose release failed is closed: nothing can save it now.
	d.mu.Lock()
	for _, p := range d.profiles {
		p.endLocked(causeClosed, ErrClosed)
	}
	d.mu.Unlock()
	d.cancel()
	d.node.bounds.forget(d.ctx)
	d.closeExecutors()
	d.wg.Wait()
	d.node.handoff.Unregister(d.cfg.Name)
	d.stop()
	return errors.Join(errs...)
}

// profileCounts counts the live and the retained profiles (the gauge of
// telemetry).
func (d *Driver[T]) profileCounts() (live, retained int64) {
	for _, p := range d.held() {
		switch p.phaseNow() {
		case phaseLive, phaseLeaving, phaseAdopting:
			live++
		case phaseRetained:
			retained++
		}
	}
	return live, retained
}
