package presencecore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/redis/go-redis/v9"
)

// Presence beats one server's presence and reads other servers'. Create it
// with [New]; its methods are safe for concurrent use.
type Presence struct {
	rdb   redis.UniversalClient
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	// fenceAfter is TTL-FenceMargin: how long after an acknowledged beat was
	// sent the lease lapses.
	fenceAfter time.Duration
	// shards are the shards of the presence hash; own is ours.
	shards []shard
	own    shard
	// layout is the key of the layout hash: the shard counts in use.
	layout string
	// markTTL is how long a shard-count mark lasts: every server makes a
	// full check at least every CheckEvery beats, so the mark of a running
	// count is always written again before it lapses.
	markTTL time.Duration
	// marking is true while a mark of the loop runs (at most one at once).
	marking atomic.Bool

	// base is cancelled by Close; it cancels the loops and in-flight beats.
	base       context.Context
	cancelBase context.CancelFunc
	// wg counts the loop goroutines and the beat calls; Close waits for it.
	wg sync.WaitGroup

	// lease is the current Lease (nil before the first acknowledged beat);
	// read without a lock, written under mu.
	lease atomic.Pointer[Lease]
	// leaseChanged wakes the fence goroutine (buffered 1).
	leaseChanged chan struct{}
	// inflight counts beat calls still running, including abandoned ones.
	inflight atomic.Int32
	// beatsDone counts Beat calls that have returned (tests wait on it).
	beatsDone atomic.Int64

	mu       sync.Mutex
	renewed  chan struct{} // closed when the next lease generation starts
	lastSent time.Time     // clock time the last acknowledged beat was sent; zero: none
	// claimedAt is when this instance's first acknowledged beat was sent:
	// from then on no other instance beats its JobID (see ClaimedAt).
	claimedAt time.Time
	failing   bool // a beat failed since the last success
	failures  int  // beats failed since the last success
	started   bool
	closed    bool

	// The beat's own state (see beat.go and identity.go).
	lastExpiry    int64     // expiry (ms, Redis clock) our last acknowledged beat wrote; 0: none
	needCheck     bool      // the next loop beat is a full check
	sinceCheck    int       // loop beats since the last full check
	claimed       bool      // a beat of ours was written: the JobID is ours
	noRenewBefore time.Time // a beat sent before this cannot extend or start a lease (a conflict was seen)
	conflicted    bool      // a conflict was logged and no beat has succeeded since
	otherShards   string    // the other shard counts in use last logged; "": none
	// lastSessions is the session count our last acknowledged beat wrote
	// into the load hash; -1: none known (a beat sends it again).
	lastSessions int
	loadFailing  bool // a write of the count failed and no write succeeded since (logged once)
	// ahead are the beats read further ahead than one TTL (read.go).
	ahead map[string]aheadState
	// clocks is what is known of each shard's Redis clock, by shard key
	// (clockwatch.go).
	clocks map[string]*shardClock
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
	shards := shardsOf(cfg.Key, cfg.Shards)
	return &Presence{
		rdb:          rdb,
		cfg:          cfg,
		clock:        cfg.Clock,
		log:          cfg.Logger.With("component", "presence", "instance", cfg.Instance),
		fenceAfter:   cfg.TTL - cfg.FenceMargin,
		shards:       shards,
		own:          shards[ShardOf(cfg.JobID, cfg.Shards)],
		layout:       LayoutKey(cfg.Key),
		markTTL:      CheckEvery*cfg.Beat + cfg.TTL,
		base:         base,
		cancelBase:   cancel,
		leaseChanged: make(chan struct{}, 1),
		renewed:      make(chan struct{}),
		needCheck:    true,
		lastSessions: -1,
		ahead:        make(map[string]aheadState),
		clocks:       make(map[string]*shardClock),
	}, nil
}

// Config returns the configuration in effect, defaults applied.
func (p *Presence) Config() Config { return p.cfg }

// Instance returns this process's instance id (Config.Instance).
func (p *Presence) Instance() string { return p.cfg.Instance }

// Keys returns the keys of every shard of the presence hash, shard 0 first.
func (p *Presence) Keys() []string {
	keys := make([]string, len(p.shards))
	for i, s := range p.shards {
		keys[i] = s.key
	}
	return keys
}

// KeyOf returns the key of the shard jobID beats into.
func (p *Presence) KeyOf(jobID string) string {
	return p.shardOf(jobID).key
}

// shardOf returns the shard jobID beats into.
func (p *Presence) shardOf(jobID string) shard {
	return p.shards[ShardOf(jobID, len(p.shards))]
}

// Start runs two goroutines: the beat loop (one beat now, then one every
// Config.Beat on the clock) and the lease's fence goroutine, which calls
// Config.OnLapse when the lease lapses. They share nothing that can block:
// a beat call that hangs delays neither the deadline nor the next beat.
// Failures are logged (the first after a success as a warning, the recovery
// as info) and the loop keeps its pace: a beat is never worth backing off
// from. Start is idempotent and does nothing after Close.
func (p *Presence) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	p.wg.Add(2)
	go p.run(p.base)
	go p.fenceLoop(p.base)
}

// Close stops the loops, cancels beats in flight and waits for them to end;
// after it returns nil no goroutine of p runs and no beat is sent any more (a
// cancelled one may still have reached Redis, which is why Remove comes after
// Close). It does not remove this server's field (see [Presence.Remove]). ctx
// bounds the wait: when it ends first Close returns its error wrapped (a beat
// call stuck in a client that ignores cancellation, or an OnLapse callback
// that does not return, can make it wait). Closing twice is fine. Reads keep
// working after Close; the lease is no longer extended.
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

// Remove deletes this server's field and its owner from the hash (one script
// round trip): after a clean shutdown, once its locks are released and after
// Close, so that no later beat writes it again. Others then read this server
// as stopped (or unknown during a Redis restart grace) without waiting for
// the TTL, and a new process may take the JobID at once (see Claim). The
// field is left alone when another instance owns it (this process lost its
// JobID to it). The lease ends here: it is not valid from here on.
// Errors are wrapped "presence remove: ...".
func (p *Presence) Remove(ctx context.Context) error {
	p.mu.Lock()
	p.lastSent = time.Time{}
	p.lastExpiry = 0
	p.lastSessions = -1
	if l := p.lease.Load(); l != nil {
		p.lease.Store(&Lease{Gen: l.Gen})
	}
	p.mu.Unlock()
	ours, err := presencescript.Remove.Run(ctx, p.rdb, p.own.key,
		presencescript.RemoveArgs{Owners: p.own.owners, Load: p.own.load, JobID: p.cfg.JobID, Instance: p.cfg.Instance})
	if err != nil {
		return fmt.Errorf("presence remove: %w", err)
	}
	if !ours {
		p.log.Info("presence: left the JobID's beat in place: another instance owns it")
	}
	return nil
}

// ClaimedAt returns the clock time at which this instance's first
// acknowledged beat was sent (zero before one): the beat claimed the JobID,
// so any other instance of it had stopped beating by then (its beat had
// expired, or it had removed it). A lock of this JobID written before that
// moment belongs to an instance that has stopped.
func (p *Presence) ClaimedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claimedAt
}
