package presencecore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/ckernel/playerdata/internal/jobid"
)

const (
	// DefaultBeat is the beat interval: three beats fit in one TTL, so one or
	// two lost beats never make a live server read as stopped.
	DefaultBeat = 3 * time.Second
	// DefaultTTL is how long a beat stays alive on the Redis clock: long enough
	// to ride out a short Redis hiccup, short enough that a crash is taken over
	// within about 10 to 15 s.
	DefaultTTL = 10 * time.Second
	// DefaultKeyName is the name of the presence hash under a namespace.
	DefaultKeyName = "CKPresence"
	// DefaultShards is one presence hash: plenty for a few hundred servers
	// (each beat is two Redis commands on one key), and the layout every
	// deployment had before shards existed.
	DefaultShards = 1
	// MaxShards bounds Config.Shards: a reader's List reads every shard.
	MaxShards = 1024
	// CheckEvery is how often, at most, the beat loop runs a full check
	// (INFO server, the run meta, cleaning, the shard-count marker): every
	// CheckEvery-th beat, and the beat after any failure or after Redis
	// forgot the script. The beats in between are the two-command fast path.
	CheckEvery = 10
)

// MetaRun and MetaSince are the meta fields of a presence hash (see the
// package doc, "Keys", and beat.lua): the run of Redis that the hash's
// beats were written under, and when that run was first seen (ms, Redis
// clock). They start with a NUL byte, which no JobID may hold. MetaEnc is
// no server either: a field of the shard, owners and load hashes whose
// value is longer than hash-max-listpack-value, so that Redis keeps them
// hashtables, where a beat finds its field in O(1) (beat.lua).
const (
	MetaRun   = "\x00run"
	MetaSince = "\x00since"
	MetaEnc   = "\x00enc"
)

// KeyFor returns the presence hash key under namespace: "<namespace>:CKPresence",
// or "CKPresence" when namespace is empty.
func KeyFor(namespace string) string {
	if namespace == "" {
		return DefaultKeyName
	}
	return namespace + ":" + DefaultKeyName
}

// Config configures a [Presence]. Zero values take the defaults; invalid values
// are refused by [New], never silently fixed.
type Config struct {
	// Key is the full Redis key of the presence hash, e.g. KeyFor("mygame").
	// default: none (required)
	Key string
	// JobID names this server: non-empty, at most 128 bytes of UTF-8,
	// without whitespace, control characters, '.', '*' or '>' (a NATS
	// subject token, as internal/jobid checks).
	// default: none (required)
	JobID string
	// Beat is the interval between beats of the loop started by Start, and
	// the deadline of each beat call.
	// default: DefaultBeat (3s)
	Beat time.Duration
	// TTL is how long a beat stays alive on the Redis clock; must be > Beat and
	// at least 1ms. Every server reading a hash should use the writers' TTL.
	// default: DefaultTTL (10s)
	TTL time.Duration
	// Instance names this process among all that ever beat JobID: a restart
	// keeps the JobID and gets a new instance, which is how a beat of an
	// earlier run (or of another process configured with the same JobID) is
	// told from our own. 1 to 64 letters, digits, '-' or '_'.
	// default: 16 random hex digits (crypto/rand)
	Instance string
	// Shards splits the presence hash into this many hashes, a JobID's shard
	// being ShardOf(JobID, Shards): shard 0 is Key itself, shard n the key
	// ShardKey(Key, n), each in a Redis Cluster slot of its own. Every server
	// and every reader of a deployment must use the same count (a reader looks
	// for a server only in the shard its own count names); a reader notices a
	// different count where it cheaply can and answers Unknown (see
	// ErrShardMismatch). Change it only with every server stopped.
	// default: DefaultShards (1)
	Shards int
	// FenceMargin: the lease lapses TTL-FenceMargin after the last
	// acknowledged beat was sent, FenceMargin before others can read this
	// server as stopped. Must be < TTL, and TTL-FenceMargin must exceed Beat
	// (or a healthy server would lapse between two beats).
	// default: Beat
	FenceMargin time.Duration
	// Clock drives the beat loop, the lease and each beat's deadline.
	// default: clock.New() (the real, monotonic clock)
	Clock clock.Clock
	// Logger receives the beat loop's warnings and recoveries. Its lines
	// carry "component" and "instance"; give a logger that names the job
	// (datadriver's Node gives its own, With("job", JobID)).
	// default: slog.Default()
	Logger *slog.Logger
	// OnLapse is called when the lease of generation gen lapses (see
	// [Lease]): once per generation, in order, on the lease's own goroutine
	// started by Start, which makes no network call. A server ends every
	// session it holds under a lapsed generation (self-fencing). It must
	// return promptly and must not call Close. When a late beat renewed the
	// lease before the lapse was seen, it is still called, with the old
	// generation. Without Start it is never called.
	// default: nil (no call; Lease and Holds still answer)
	OnLapse func(gen uint64)
	// Sessions returns this server's session count (datadriver's Node gives
	// the profiles it holds or is loading, over all its drivers), published
	// beside its beat for [Presence.Loads] and [Presence.List] (see the
	// package doc, "Load"). It is called once per beat, on the beat loop's
	// path before the beat is sent: it must return at once and not block. A
	// negative answer publishes nothing on that beat.
	// default: nil (no count is published)
	Sessions func() int
}

// withDefaults returns cfg with zero fields set to their defaults, or an error
// wrapping ErrInvalidConfig.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Key == "" {
		return cfg, fmt.Errorf("%w: Key is required", ErrInvalidConfig)
	}
	if err := checkJobID(cfg.JobID); err != nil {
		return cfg, fmt.Errorf("%w: JobID: %w", ErrInvalidConfig, err)
	}
	if cfg.Beat == 0 {
		cfg.Beat = DefaultBeat
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.FenceMargin == 0 {
		cfg.FenceMargin = cfg.Beat
	}
	if cfg.Shards == 0 {
		cfg.Shards = DefaultShards
	}
	switch {
	case cfg.Shards < 0 || cfg.Shards > MaxShards:
		return cfg, fmt.Errorf("%w: Shards %d is outside 1 to %d", ErrInvalidConfig, cfg.Shards, MaxShards)
	case cfg.Beat < 0:
		return cfg, fmt.Errorf("%w: Beat %v is negative", ErrInvalidConfig, cfg.Beat)
	case cfg.TTL < time.Millisecond:
		return cfg, fmt.Errorf("%w: TTL %v is under 1ms", ErrInvalidConfig, cfg.TTL)
	case cfg.TTL <= cfg.Beat:
		return cfg, fmt.Errorf("%w: TTL %v must exceed Beat %v", ErrInvalidConfig, cfg.TTL, cfg.Beat)
	case cfg.FenceMargin < 0:
		return cfg, fmt.Errorf("%w: FenceMargin %v is negative", ErrInvalidConfig, cfg.FenceMargin)
	case cfg.FenceMargin >= cfg.TTL:
		return cfg, fmt.Errorf("%w: FenceMargin %v must be under TTL %v", ErrInvalidConfig, cfg.FenceMargin, cfg.TTL)
	case cfg.TTL-cfg.FenceMargin <= cfg.Beat:
		return cfg, fmt.Errorf("%w: TTL-FenceMargin %v must exceed Beat %v", ErrInvalidConfig, cfg.TTL-cfg.FenceMargin, cfg.Beat)
	}
	if err := checkKey(cfg.Key, cfg.Shards); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.Instance == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return cfg, fmt.Errorf("presence: instance id: %w", err)
		}
		cfg.Instance = hex.EncodeToString(b[:])
	}
	if err := checkInstance(cfg.Instance); err != nil {
		return cfg, fmt.Errorf("%w: Instance: %w", ErrInvalidConfig, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// checkInstance refuses an instance id that would not read well in a log
// line or could be confused with a meta field.
func checkInstance(inst string) error {
	if inst == "" || len(inst) > 64 {
		return fmt.Errorf("%q must have 1 to 64 characters", inst)
	}
	for _, r := range inst {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%q has %q: only letters, digits, '-' and '_'", inst, r)
		}
	}
	return nil
}

// checkJobID refuses a JobID that cannot name a server (the project's one
// rule, internal/jobid's).
func checkJobID(jobID string) error {
	if reason := jobid.Problem(jobID); reason != "" {
		return fmt.Errorf("%w: %s", ErrInvalidJobID, reason)
	}
	return nil
}
