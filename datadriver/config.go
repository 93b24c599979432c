package datadriver

import (
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/messaging"
)

// Defaults of Config. They are the reference design's.
// Defaults of the Config and NodeConfig fields, each with its reason.
const (
	DefaultMoveHold     = 30 * time.Second  // a redirected client reconnects in seconds; a lost one frees the profile soon
	DefaultLockWait     = 15 * time.Second  // a holder ends a stale session and saves, or a crashed one is proven stopped (10 to 15 s)
	DefaultLockTTL      = 180 * time.Second // age after which a lock without the presence flag is stale
	DefaultLockSkew     = 60 * time.Second  // margin on LockTTL for a failover whose clock differs
	DefaultAutosave     = 30 * time.Second  // a crash loses at most this much progress
	DefaultHistory      = 24                // with HistoryEvery, a day of play
	MaxHistory          = 1000              // the most versions History may keep
	DefaultHistoryEvery = time.Hour         // a day back in History versions; an hour-old mistake undone
	// DefaultHistoryBytesPerData is HistoryBytes's default as a multiple of
	// MaxDataBytes: the default day of versions of a profile takes about one
	// compressed copy and its deltas, a fraction of this, and a big profile
	// kept in many versions stays within this multiple of its size.
	DefaultHistoryBytesPerData = 8
	DefaultMaxInbox            = 1000           // messages are gifts and grants, not a queue
	DefaultMaxMessageBytes     = 64 << 10       // a message is a gift or a grant, not a profile
	DefaultMaxMessageAttempts  = 5              // rides out a passing failure; a message that never applies stops costing pulls
	DefaultIdempotencyWindow   = 24 * time.Hour // a shop retries within minutes, a batch job within a day
	DefaultMaxIdempotencyKeys  = 10 * DefaultMaxInbox
	DefaultMaxDataBytes        = 4 << 20          // far under Redis's 512 MiB; a profile that large is a bug
	DefaultSaveTimeout         = 10 * time.Second // one stuck save never holds up the others
	DefaultReplicaTimeout      = time.Second      // a replica on the same network answers in milliseconds
	DefaultMaxConcurrentSaves  = 16               // autosaves of one Node at once
	DefaultPingTimeout         = 2 * time.Second  // a healthy Redis answers in a millisecond; say so at once if not
)

// NodeConfig configures a Node: one per game-server process. Every field
// but Redis is optional; its default is in brackets.
type NodeConfig struct {
	// JobID names this server in lock records and on the bus (a NATS subject
	// token); NewNode refuses it while another process beats it (ErrJobIDInUse).
	// [a random "anon-…"]
	JobID string
	// Redis holds the records and the presence hash: one Redis, Sentinel or
	// Cluster (required).
	Redis redis.UniversalClient
	// PresenceRedis carries the beats and presence reads, apart from saves;
	// give one when Redis's client carries hooks the beats need too.
	// [a client made from Redis's options, pool 4]
	PresenceRedis redis.UniversalClient
	// AcceptEviction starts on a Redis whose maxmemory-policy is allkeys-*:
	// an evicted record reads as a new profile. [false: ErrEvictionPolicy]
	AcceptEviction bool
	Namespace      string       // prefix of every Redis key and bus subject [none]
	Clock          clock.Clock  // drives every timer [clock.New()]
	Logger         *slog.Logger // the Node's log, each line with its JobID [slog.Default()]
	// SaveTimeout bounds each acquire, save and release [DefaultSaveTimeout];
	// MaxConcurrentSaves the autosaves at once [DefaultMaxConcurrentSaves].
	SaveTimeout        time.Duration
	MaxConcurrentSaves int
	// Entropy is the source of lock tokens, which must be unpredictable; a
	// fixed one replays a simulation. [ChaCha8 seeded from crypto/rand]
	Entropy io.Reader

	// NATS carries release requests and message notifications
	// ("<Namespace>.<SubjectPrefix>.<JobID>"); Bus replaces it (tests).
	// [none: joins poll; crashed holders are still found through presence]
	NATS *nats.Conn
	Bus  messaging.Bus
	// DisableHandoff: no subscription, and locks without the presence flag
	// (they change hands by release or by age only). [false]
	DisableHandoff bool
	// PingTimeout bounds NewNode's first PING of Redis and NATS.
	// [DefaultPingTimeout]
	PingTimeout time.Duration
	// Beat is the beat period, PresenceTTL how long a beat keeps a server
	// alive, FenceMargin how much earlier its sessions end (see
	// docs/self-fencing.md). [3 s, 10 s, Beat]
	Beat, PresenceTTL, FenceMargin time.Duration
	// RequestRepeat: a waiting join repeats its request; ParkMin, ParkMax
	// bound its park between attempts. [4 s, 0.5 s, 2 s]
	RequestRepeat, ParkMin, ParkMax time.Duration
	// PresenceKey names the presence hash; PresenceShards splits it by JobID
	// (the same count on every server). ["CKPresence", 1]
	PresenceKey    string
	PresenceShards int
	SubjectPrefix  string        // of handoff subjects ["CKHandoff"]
	TradeRetain    time.Duration // a settled trade's journal entry is kept [a day]
	// MinReplicas makes acquisitions, releases, Saves, trade commits and
	// Sends wait (WAIT, at most ReplicaTimeout) for that many replicas;
	// fewer: ErrNotReplicated. [0; DefaultReplicaTimeout]
	MinReplicas    int
	ReplicaTimeout time.Duration

	// MeterProvider and TracerProvider receive the metrics and spans
	// (OpenTelemetry, docs/operations.md). [the global providers]
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// RequestKey signs every message between servers (HMAC-SHA256, ≥ 16
	// bytes, NATS only); RequestKeyOptional also accepts unsigned ones
	// (rollout); RequestKeysAccepted are further keys (rotation). [none:
	// docs/bus.md says what a peer can then do]
	RequestKey          []byte
	RequestKeyOptional  bool
	RequestKeysAccepted [][]byte
}

// Config configures a Driver: one per kind of profile on a Node. Every
// field but Name is optional; its default is in brackets.
type Config[T any] struct {
	// Name identifies the profile kind in keys and messages: unique per Node,
	// 1 to MaxNameBytes letters, digits, '_' and '-'.
	Name string
	// Defaults is a new profile's data; a field a stored one lacks takes its
	// value from it, at every depth. [the zero T]
	Defaults T
	TagName  string // struct tag of stored fields: "msgpack" or "json" ["msgpack"]
	// AllowLossyFields accepts a T with fields that do not round-trip
	// (unexported, interface-typed); else NewDriver names them. [false]
	AllowLossyFields bool
	// Migrations upgrade stored data to schema version len(Migrations). [none]
	Migrations []Migration
	// LockWait bounds Join's wait for another server's lock
	// [DefaultLockWait]; LocalHandoff a load's wait on this Node [LockWait
	// for Join, none for Load].
	LockWait, LocalHandoff time.Duration
	// LockTTL + LockSkew: the age after which a lock without the presence
	// flag may be taken. [DefaultLockTTL, DefaultLockSkew]
	LockTTL, LockSkew time.Duration
	// Autosave is the background save period; negative: off.
	// [DefaultAutosave]
	Autosave time.Duration
	// History versions are kept (negative: none), at most one per
	// HistoryEvery: what RestoreAt can reach. [DefaultHistory, DefaultHistoryEvery]
	History      int
	HistoryEvery time.Duration
	// HistoryBytes bounds the Redis bytes of one profile's kept versions
	// (compressed copies and deltas, as stored): the oldest go first beyond
	// it, as beyond History; the newest is kept whatever its size.
	// [DefaultHistoryBytesPerData × MaxDataBytes: 32 MiB]
	HistoryBytes int
	// OnMessage applies a message (Driver.Send) to a copy of the data, kept
	// when it returns nil: applied exactly once. A refused message is tried
	// again at autosave ticks (after 1, 2, 4, then every 8 Autosave
	// periods); after MaxMessageAttempts refusals it is a dead letter.
	// [nil; DefaultMaxMessageAttempts]
	OnMessage          func(d *T, m Message) error
	MaxMessageAttempts int
	// MaxInbox bounds the messages waiting, MaxMessageBytes one body.
	// [DefaultMaxInbox, DefaultMaxMessageBytes]
	MaxInbox, MaxMessageBytes int
	// IdempotencyWindow: how long a Send's IdempotencyKey is remembered
	// (and always while its message waits or is a dead letter);
	// MaxIdempotencyKeys: how many, beyond which a new keyed Send is refused
	// (ErrTooManyIdempotencyKeys). [a day, DefaultMaxIdempotencyKeys]
	IdempotencyWindow  time.Duration
	MaxIdempotencyKeys int
	MaxDataBytes       int // bound of one encoded profile (ErrTooLarge) [DefaultMaxDataBytes]
	// Kick is called once per session the driver ends by itself;
	// OnLockLost after it for a session that ends without its progress;
	// OnSaveError when a background write fails. The callbacks of one key
	// run one at a time in the order they were called (a leave's OnRelease
	// cleanups wait up to 500 ms for its Kick to return); keys take turns on
	// at most 8 goroutines, so a callback that blocks holds up its own key,
	// and other keys only while 8 keys have a callback running. [nil]
	Kick        func(key string, reason KickReason)
	OnLockLost  func(key string, err error)
	OnSaveError func(key string, err error)
	// OnSaved is called after each write of a profile that landed (Save,
	// autosave, the release, an adoption's save, a trade's settle; not a
	// lock refresh, which writes no data) with what it stored: the version
	// and time, how many Updates it includes, and whether MinReplicas
	// acknowledged it (see Saved and Profile.LastSaved). It runs like Kick,
	// in the order the key's writes landed, a panic recovered and logged:
	// it must not block for long. [nil]
	OnSaved func(key string, s Saved)
	// DisableHandoff: this driver's locks carry no presence flag and it
	// answers no requests. [false]
	DisableHandoff bool
	// MoveHold bounds how long a profile moved here (Profile.MoveTo on
	// another server) waits for its player's Join, after which it is saved
	// and released like a leave. [DefaultMoveHold]
	MoveHold time.Duration
}

// withDefaults returns c with zero fields set to their defaults, or an error
// wrapping ErrInvalidConfig.
func (c Config[T]) withDefaults() (Config[T], error) {
	if err := ValidName(c.Name); err != nil {
		return c, err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"LockWait", c.LockWait}, {"LocalHandoff", c.LocalHandoff}, {"LockTTL", c.LockTTL}, {"LockSkew", c.LockSkew}, {"MoveHold", c.MoveHold}} {
		if d.v < 0 {
			return c, fmt.Errorf("%w: %s is negative (%s)", ErrInvalidConfig, d.name, d.v)
		}
	}
	if c.MaxDataBytes < 0 || c.HistoryBytes < 0 {
		return c, fmt.Errorf("%w: MaxDataBytes and HistoryBytes must not be negative (%d, %d)", ErrInvalidConfig,
			c.MaxDataBytes, c.HistoryBytes)
	}
	if c.LockWait == 0 {
		c.LockWait = DefaultLockWait
	}
	if c.MoveHold == 0 {
		c.MoveHold = DefaultMoveHold
	}
	if c.LockTTL == 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.LockSkew == 0 {
		c.LockSkew = DefaultLockSkew
	}
	if c.Autosave == 0 {
		c.Autosave = DefaultAutosave
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.History < 0 {
		c.History = 0
	}
	if c.History > MaxHistory {
		return c, fmt.Errorf("%w: History %d is more than %d", ErrInvalidConfig, c.History, MaxHistory)
	}
	if c.HistoryEvery < 0 || c.MaxInbox < 0 || c.MaxMessageBytes < 0 || c.IdempotencyWindow < 0 || c.MaxIdempotencyKeys < 0 {
		return c, fmt.Errorf("%w: HistoryEvery, MaxInbox, MaxMessageBytes, IdempotencyWindow and MaxIdempotencyKeys "+
			"must not be negative", ErrInvalidConfig)
	}
	switch {
	case c.MaxMessageAttempts == 0:
		c.MaxMessageAttempts = DefaultMaxMessageAttempts
	case c.MaxMessageAttempts < 0:
		c.MaxMessageAttempts = 0 // the scripts' "never"
	}
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if c.MaxIdempotencyKeys == 0 {
		c.MaxIdempotencyKeys = DefaultMaxIdempotencyKeys
	}
	if c.HistoryEvery == 0 {
		c.HistoryEvery = DefaultHistoryEvery
	}
	if c.MaxInbox == 0 {
		c.MaxInbox = DefaultMaxInbox
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxDataBytes == 0 {
		c.MaxDataBytes = DefaultMaxDataBytes
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = DefaultHistoryBytesPerData * c.MaxDataBytes
	}
	return c, nil
}

// MaxNameBytes bounds a driver Name (it is in every key and subject).
const MaxNameBytes = 128

// ValidName reports whether name can name a driver (it appears in Redis keys
// and NATS subjects): an error wrapping ErrInvalidConfig unless it is 1 to
// MaxNameBytes ASCII letters, digits, '_' and '-'.
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: Name is required", ErrInvalidConfig)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: Name is %d bytes, more than %d", ErrInvalidConfig, len(name), MaxNameBytes)
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%w: Name %q has %s at byte %d: a Name is letters, digits, '_' and '-'",
				ErrInvalidConfig, name, describeRune(r), i)
		}
	}
	return nil
}

// describeRune names a character a Name may not have.
func describeRune(r rune) string {
	switch {
	case r == ' ':
		return "a space"
	case r == '.':
		return "a dot"
	case r == '{' || r == '}':
		return fmt.Sprintf("a brace (%q)", r)
	case r == '*' || r == '>':
		return fmt.Sprintf("a NATS wildcard (%q)", r)
	case r == utf8.RuneError:
		return "invalid UTF-8"
	}
	return fmt.Sprintf("%q", r)
}
