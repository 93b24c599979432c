package presence

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed beat.lua
	beatLua string
	//go:embed read.lua
	readLua string
	//go:embed list.lua
	listLua string
)

// Presence beats one server's presence and reads other servers'. Create it
// with [New]; its methods are safe for concurrent use.
type Presence struct {
	rdb   redis.UniversalClient
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	ttlMS int64
	// fenceAfter is TTL-FenceMargin: how long after a successful beat was sent
	// this server goes stale.
	fenceAfter time.Duration

	beatScript, readScript, listScript *redis.Script

	// base is cancelled by Close; it cancels the loop and in-flight beats.
	base       context.Context
	cancelBase context.CancelFunc
	// wg counts the loop goroutine and in-flight beats; Close waits for it.
	wg sync.WaitGroup
	// rearm tells the loop a success moved the stale deadline (buffered 1).
	rearm chan struct{}

	mu         sync.Mutex
	lastSent   time.Time // clock time the last successful beat was sent; zero: none
	startedAt  time.Time // clock time of Start: the stale reference until a beat succeeds
	staleFired bool      // OnStale ran for the current stale episode
	failing    bool      // a beat failed since the last success
	failures   int       // beats failed since the last success
	started    bool
	closed     bool
}

// New validates cfg, applies its defaults and returns a Presence over rdb. It
// does no I/O: call [Presence.Start] (or [Presence.Beat]) to beat. An invalid
// cfg gives an error wrapping [ErrInvalidConfig].
func New(rdb redis.UniversalClient, cfg Config) (*Presence, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	return &Presence{
		rdb:        rdb,
		cfg:        cfg,
		clock:      cfg.Clock,
		log:        cfg.Logger.With("component", "presence", "job", cfg.JobID),
		ttlMS:      cfg.TTL.Milliseconds(),
		fenceAfter: cfg.TTL - cfg.FenceMargin,
		beatScript: redis.NewScript(beatLua),
		readScript: redis.NewScript(readLua),
		listScript: redis.NewScript(listLua),
		base:       base,
		cancelBase: cancel,
		rearm:      make(chan struct{}, 1),
	}, nil
}

// Config returns the configuration in effect, defaults applied.
func (p *Presence) Config() Config { return p.cfg }

// Start runs the beat loop in the background: one beat now, then one every
// Config.Beat on the clock, and the stale timer that calls Config.OnStale
// (once TTL-FenceMargin has passed since the last successful beat was sent, or
// since Start while no beat has succeeded).
// Failures are logged (the first after a success as a warning, the recovery
// as info) and the loop keeps its pace: a beat is never worth backing off
// from. The loop puts no deadline of its own on a beat (one on the injected
// clock cannot bound a network call): the client's ReadTimeout/WriteTimeout
// do, and a beat that overruns only delays the next tick. Start is idempotent
// and does nothing after Close.
func (p *Presence) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.startedAt = p.clock.Now()
	p.wg.Add(1)
	go p.run(p.base)
}

// Close stops the beat loop, cancels beats in flight and waits for them and
// the loop to end; after it returns nil no goroutine of p runs and no beat is
// sent any more (a cancelled one may still have reached Redis, which is why
// Remove comes after Close). It does not remove this server's field (see [Presence.Remove]). ctx
// bounds the wait: when it ends first Close returns its error wrapped (only an
// OnStale callback that does not return can make it wait). Closing twice is
// fine. Reads keep working after Close.
func (p *Presence) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancelBase()

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("presence close: %w", ctx.Err())
	}
}

// Remove deletes this server's field from the hash (one HDEL): after a clean
// shutdown, once its locks are released and after Close, so that no later beat
// writes it again. Others then read this server as stopped (or unknown during a
// Redis restart grace) without waiting for the TTL. Stale reports true from
// here on. Errors are wrapped "presence remove: ...".
func (p *Presence) Remove(ctx context.Context) error {
	p.mu.Lock()
	p.lastSent = time.Time{}
	p.mu.Unlock()
	if err := p.rdb.HDel(ctx, p.cfg.Key, p.cfg.JobID).Err(); err != nil {
		return fmt.Errorf("presence remove: %w", err)
	}
	return nil
}

// Stale reports whether this server may already read as stopped to others:
// it never beat successfully (or called Remove), or its last successful beat
// was sent more than TTL-FenceMargin ago on the clock. A server that is stale
// must not start sessions and should end the ones it holds.
func (p *Presence) Stale() bool {
	now := p.clock.Now()
	p.mu.Lock()
	last := p.lastSent
	p.mu.Unlock()
	return last.IsZero() || !now.Before(last.Add(p.fenceAfter))
}

// LastBeat returns the clock time at which the last successful beat was sent
// (before its round trip: the lower bound of its expiry), or the zero time if
// none succeeded yet.
func (p *Presence) LastBeat() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSent
}
