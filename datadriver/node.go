package datadriver

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/sameredis"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/messaging"
)

// Node is one game-server process: its JobID, its Redis client, its clock
// and logger, and every driver it runs. Close it on shutdown: it saves and
// releases every profile it holds and stops every goroutine it started.
type Node struct {
	jobID string
	rdb   redis.UniversalClient
	ns    string
	clock clock.Clock
	log   *slog.Logger
	cfg   NodeConfig
	// bounds bounds the Redis calls by SaveTimeout (bounds.go).
	bounds callBounds
	// batcher runs the lock's scripts when SoloCalls lets calls share
	// pipelines (nil: they go through rdb; see locks).
	batcher *rscript.Batcher

	saveSem chan struct{} // bounds concurrent autosaves
	// waitSlots bounds the replica waits holding pool connections at once
	// (replicas.go).
	waitSlots chan struct{}

	// presence is this server's presence: beaten (and its lease kept) while
	// handoff is on, read to tell live holders from stopped ones either way.
	// The Node owns its lifecycle: it starts, closes and removes it.
	presence *presencecore.Presence
	handoff  *handoffcore.Handoff // always set; without a bus when handoff is off
	journal  *tradejournal.Journal
	// handoffOn is the one place that says whether cross-server handoff is
	// on: the Node beats presence, subscribes, and its locks carry the
	// presence flag (a test may turn it off for one driver: export_test.go).
	handoffOn bool
	bus       *messaging.NATSBus // the NATS bus the Node made, if any
	prefix    string             // its subject prefix
	tel       *telemetry.Telemetry
	unregBus  func()

	wg sync.WaitGroup // background writes of the Node (trade settle marks)

	// prdb is the presence client; closePresenceRedis closes it when the
	// Node made it (nil: none).
	prdb               redis.UniversalClient
	closePresenceRedis func() error
	// dataset keeps the proof that prdb and rdb reach one dataset
	// (dataset.go).
	dataset *sameredis.Guard
	// memory is what the Node knows of Redis's eviction policy
	// (eviction.go); watchers are its goroutines that outlive Close's
	// release work (the memory watch), stopped by cancel.
	memory     memoryWatch
	watchers   sync.WaitGroup
	unregRedis func()

	ctx    context.Context // cancelled by Close: stops background work
	cancel context.CancelFunc

	entropyMu  sync.Mutex
	entropyBuf [16]byte // randomHex's, under entropyMu

	// closing is closed when Close begins (Closing).
	closing chan struct{}

	// moves are the answers this Node's moves wait for (move_node.go);
	// draining is set while Drain runs (this Node takes no move then).
	moves    moveWaits
	draining atomic.Bool

	mu      sync.Mutex
	drivers map[string]driverHandle
	closed  bool
	// lastSessions is the session count the beat last took (sessions.go).
	lastSessions atomic.Int64
}

// driverHandle is what a Node needs of its drivers, whatever their T.
type driverHandle interface {
	// shutdown releases every profile of the driver and waits for its
	// goroutines.
	shutdown(ctx context.Context) error
	// fenceLapsed ends every session whose lease has passed (this server's
	// presence lease lapsed) and reports how many it ended.
	fenceLapsed() int
	// movePrepare and moveCommit are the target's side of a move (move_target.go).
	movePrepare(m moveMsg, signed bool) moveMsg
	moveCommit(m moveMsg)
	// movers lists the live sessions a drain may move (drain.go).
	movers() []mover
	// sessions counts the driver's sessions: profiles held or loading;
	// with wait false it never waits for the driver's lock (sessions.go).
	sessions(wait bool) int
}

// NewNode creates a Node: it pings Redis and NATS (ErrRedisUnavailable,
// ErrBusDown), refuses a Redis that may evict records (ErrEvictionPolicy) or
// a presence client that reaches another dataset (ErrInvalidConfig), and
// claims the JobID (ErrJobIDInUse while another process beats it; an
// earlier run's beat is waited out). ctx bounds the start-up only.
func NewNode(ctx context.Context, cfg NodeConfig) (_ *Node, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	n := &Node{
		rdb:       cfg.Redis,
		ns:        cfg.Namespace,
		clock:     cfg.Clock,
		bounds:    callBounds{clock: cfg.Clock},
		cfg:       cfg,
		saveSem:   make(chan struct{}, cfg.MaxConcurrentSaves),
		waitSlots: make(chan struct{}, waitSlotsFor(cfg.Redis)),
		drivers:   make(map[string]driverHandle),
		closing:   make(chan struct{}),
		handoffOn: !cfg.DisableHandoff,
	}
	if cfg.SoloCalls > 0 {
		n.batcher = rscript.NewBatcher(cfg.Redis, cfg.SoloCalls)
	}
	n.journal = tradejournal.New(cfg.Redis, cfg.Namespace, cfg.TradeRetain)
	n.jobID = cfg.JobID
	if n.jobID == "" {
		id, err := n.randomHex(8)
		if err != nil {
			return nil, err
		}
		n.jobID = "anon-" + id
	}
	n.log = cfg.Logger.With("job", n.jobID)
	defer func() {
		if err != nil && n.dataset != nil {
			n.dataset.Close()
		}
		if err != nil && n.closePresenceRedis != nil {
			_ = n.closePresenceRedis()
		}
	}()
	if err := n.startHandoff(); err != nil {
		return nil, err
	}
	n.startTelemetry()
	for _, check := range []func(context.Context) error{n.ping, n.pingNATS, n.checkEviction, n.checkDataset, n.claim} {
		if err := check(ctx); err != nil {
			return nil, err
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.presence.Start()
	n.unregRedis = n.tel.RegisterRedis(n.lastMemory)
	n.watchers.Add(1)
	go n.watchMemory()
	n.handoff.HandleMoves(n.onMove)
	n.handoff.Start()
	n.flushSubscription(ctx)
	return n, nil
}

// flushSubscription waits (at most PingTimeout) until the NATS server has
// the subscription handoff.Start made, so that a request or a message
// notification sent the moment NewNode returns reaches this Node. A NATS
// cluster tells its other nodes of the interest a moment later. On failure
// it only warns: a request is repeated, and a lost notification is caught
// by the profile's next save.
func (n *Node) flushSubscription(ctx context.Context) {
	nc := n.cfg.NATS
	if nc == nil || !n.handoffOn {
		return
	}
	fctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil && ctx.Err() == nil {
		n.log.Warn("NATS did not confirm this server's subscription in time; requests sent meanwhile are repeated, "+
			"and a message notification lost so is caught by the profile's next save", "err", err)
	}
}

// locks is the client of the lock's scripts (acquire, save, release): the
// Batcher, or rdb when every call goes on its own.
func (n *Node) locks() redis.UniversalClient {
	if n.batcher != nil {
		return n.batcher
	}
	return n.rdb
}

// refuseRing refuses a go-redis Ring as the client field: a Ring takes a
// shard that missed three pings out of its hash and sends its keys to the
// others until it answers again (go-redis: "no consistency between
// different shards"), so a lock record would be found missing on another
// shard and taken again there while its holder lives and beats.
func refuseRing(field string, c redis.UniversalClient) error {
	if _, ok := c.(*redis.Ring); !ok {
		return nil
	}
	return fmt.Errorf("%w: %s is a *redis.Ring, which sends a key to another shard while its own "+
		"does not answer, so a profile's lock could be taken again there while its holder lives; "+
		"use one Redis, a Sentinel failover client or a Redis Cluster", ErrInvalidConfig, field)
}

// withDefaults checks cfg and fills in the defaults of what it leaves zero.
func (cfg NodeConfig) withDefaults() (NodeConfig, error) {
	if cfg.Redis == nil {
		return cfg, fmt.Errorf("%w: Redis is required", ErrInvalidConfig)
	}
	if err := refuseRing("Redis", cfg.Redis); err != nil {
		return cfg, err
	}
	if err := refuseRing("PresenceRedis", cfg.PresenceRedis); err != nil {
		return cfg, err
	}
	if cfg.SaveTimeout < 0 || cfg.MaxConcurrentSaves < 0 || cfg.TradeRetain < 0 || cfg.PingTimeout < 0 ||
		cfg.MinReplicas < 0 || cfg.ReplicaTimeout < 0 {
		return cfg, fmt.Errorf("%w: SaveTimeout, MaxConcurrentSaves, TradeRetain, PingTimeout, MinReplicas and "+
			"ReplicaTimeout must not be negative", ErrInvalidConfig)
	}
	if cfg.MinReplicas > 0 && cfg.ReplicaTimeout == 0 {
		cfg.ReplicaTimeout = defaults.ReplicaTimeout
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = defaults.PingTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SaveTimeout == 0 {
		cfg.SaveTimeout = defaults.SaveTimeout
	}
	if cfg.MaxConcurrentSaves == 0 {
		cfg.MaxConcurrentSaves = defaults.MaxConcurrentSaves
	}
	if cfg.SoloCalls == 0 {
		cfg.SoloCalls = defaults.SoloCalls
	}
	if cfg.Entropy == nil {
		var seed [32]byte
		if _, err := crand.Read(seed[:]); err != nil {
			return cfg, fmt.Errorf("seed lock tokens: %w", err)
		}
		cfg.Entropy = mrand.NewChaCha8(seed)
	}
	return cfg, nil
}

// claim is the first beat, which claims the JobID, with handoff on or off,
// before the first Join so that it finds a lease: another live process with
// this JobID is refused (an admin tool given a live server's JobID must
// never take that server's locks as its own). Any other failure is logged
// and the loop keeps trying (its beats never overwrite another instance's
// live beat either).
func (n *Node) claim(ctx context.Context) error {
	err := n.presence.Claim(ctx)
	if err == nil {
		return nil
	}
	var inUse *presencecore.InUseError
	if !errors.As(err, &inUse) && ctx.Err() == nil {
		n.log.Warn("first presence beat failed; the beat loop keeps trying", "err", err)
		return nil
	}
	cctx, cancel := n.clock.WithTimeout(context.WithoutCancel(ctx), n.cfg.SaveTimeout)
	_ = n.presence.Close(cctx) // ends the calls of the claim
	cancel()
	if inUse != nil {
		return &JobIDInUseError{JobID: n.jobID, Instance: inUse.Other, ExpiresAt: inUse.ExpiresAt}
	}
	return fmt.Errorf("start node %s: %w", n.jobID, err)
}

// ping checks that Redis answers within PingTimeout. The PING runs on its
// own goroutine so that a client ignoring its context (go-redis without
// ContextTimeoutEnabled) cannot stretch the bound; it is left to end by the
// client's own timeouts.
func (n *Node) ping(ctx context.Context) error {
	pctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.rdb.Ping(pctx).Err() }()
	t := n.clock.Timer(n.cfg.PingTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-done:
	case <-t.C:
		err = context.DeadlineExceeded
	case <-ctx.Done():
		return fmt.Errorf("start node %s: ping Redis: %w", n.jobID, ctx.Err())
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("start node %s: ping Redis: %w", n.jobID, ctx.Err())
		}
		return fmt.Errorf("start node %s: %w: no answer to PING within %s: %w", n.jobID, ErrRedisUnavailable, n.cfg.PingTimeout, err)
	}
	return nil
}

// pingNATS checks that the NATS server answers a PING (a flush) within
// PingTimeout, when the Node has a NATS connection and handoff is on.
func (n *Node) pingNATS(ctx context.Context) error {
	nc := n.cfg.NATS
	if nc == nil || !n.handoffOn {
		return nil
	}
	pctx, cancel := n.clock.WithTimeout(ctx, n.cfg.PingTimeout)
	defer cancel()
	if err := nc.FlushWithContext(pctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("start node %s: ping NATS: %w", n.jobID, ctx.Err())
		}
		return fmt.Errorf("start node %s: %w: NATS (%s) did not answer a PING within %s: %w",
			n.jobID, ErrBusDown, strings.ToLower(nc.Status().String()), n.cfg.PingTimeout, err)
	}
	return nil
}

// onLapse runs on the presence lease's own goroutine when lease generation
// gen lapses: other servers may soon read this one as stopped and take its
// locks, so every session held under it ends now, before that can happen.
// It makes no network call (the locks are given back in the background).
func (n *Node) onLapse(gen uint64) {
	n.mu.Lock()
	drivers := n.driversLocked()
	n.mu.Unlock()
	ended := 0
	for _, d := range drivers {
		ended += d.fenceLapsed()
	}
	n.tel.Fenced(n.ctx, ended)
	n.log.Warn("presence lease lapsed; sessions held under it ended", "generation", gen, "sessions", ended)
}

// JobID is the name of this server in lock records.
func (n *Node) JobID() string { return n.jobID }

// Instance is this process's presence instance id (random per Node).
func (n *Node) Instance() string { return n.presence.Instance() }

// register adds a driver under name.
func (n *Node) register(name string, d driverHandle) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if _, ok := n.drivers[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateDriver, name)
	}
	n.drivers[name] = d
	return nil
}

// driversLocked lists the drivers; n.mu must be held.
func (n *Node) driversLocked() []driverHandle {
	drivers := make([]driverHandle, 0, len(n.drivers))
	for _, d := range n.drivers {
		drivers = append(drivers, d)
	}
	return drivers
}

// unregister forgets a driver whose creation failed.
func (n *Node) unregister(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.drivers, name)
}

// randomHex returns size random bytes from the Node's entropy, hex
// encoded.
func (n *Node) randomHex(size int) (string, error) {
	return n.randomText(size, func(b []byte) string {
		var out [2 * len(n.entropyBuf)]byte
		hex.Encode(out[:], b)
		return string(out[:2*len(b)])
	})
}

// randomText returns size random bytes from the Node's entropy as text
// encodes them (on a buffer of its own: encode must copy).
func (n *Node) randomText(size int, encode func([]byte) string) (string, error) {
	if size > len(n.entropyBuf) {
		b := make([]byte, size)
		if err := n.entropy(b); err != nil {
			return "", err
		}
		return encode(b), nil
	}
	n.entropyMu.Lock()
	defer n.entropyMu.Unlock()
	b := n.entropyBuf[:size] // the Node's buffer: a token costs one allocation, its string
	if _, err := io.ReadFull(n.cfg.Entropy, b); err != nil {
		return "", fmt.Errorf("read entropy: %w", err)
	}
	return encode(b), nil
}

// entropy fills b from the Node's entropy source.
func (n *Node) entropy(b []byte) error {
	n.entropyMu.Lock()
	defer n.entropyMu.Unlock()
	if _, err := io.ReadFull(n.cfg.Entropy, b); err != nil {
		return fmt.Errorf("read entropy: %w", err)
	}
	return nil
}

// claimedSince reports whether this process claimed its JobID after t (a
// local clock time): a lock of this JobID written before then was written
// by an instance that has stopped (presencecore.ClaimedAt), so it may be taken.
func (n *Node) claimedSince(t time.Time) bool {
	c := n.presence.ClaimedAt()
	return !c.IsZero() && c.After(t)
}

// newToken returns a fresh lock token: 128 random bits in 22 characters
// of unpadded URL-safe base64 (a 24-byte string on every resident profile,
// where 32 hex digits take 32; a token is opaque to every reader, and one
// of either form in a record works).
func (n *Node) newToken() (string, error) {
	return n.randomText(16, func(b []byte) string {
		var out [22]byte
		base64.RawURLEncoding.Encode(out[:], b)
		return string(out[:base64.RawURLEncoding.EncodedLen(len(b))])
	})
}
