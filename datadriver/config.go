package datadriver

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/messaging"
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
	// SaveTimeout bounds each acquire, save and release [defaults.SaveTimeout];
	// MaxConcurrentSaves the autosaves at once [defaults.MaxConcurrentSaves].
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
	// [defaults.PingTimeout]
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
	// fewer: ErrNotReplicated. [0; defaults.ReplicaTimeout]
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
	// [defaults.LockWait]; LocalHandoff a load's wait on this Node [LockWait
	// for Join, none for Load].
	LockWait, LocalHandoff time.Duration
	// LockTTL + LockSkew: the age after which a lock without the presence
	// flag may be taken. [defaults.LockTTL, defaults.LockSkew]
	LockTTL, LockSkew time.Duration
	// Autosave is the background save period; negative: off.
	// [defaults.Autosave]
	Autosave time.Duration
	// History versions are kept (negative: none), at most one per
	// HistoryEvery: what RestoreAt can reach. [defaults.History, defaults.HistoryEvery]
	History      int
	HistoryEvery time.Duration
	// HistoryBytes bounds the Redis bytes of one profile's kept versions
	// (compressed copies and deltas, as stored): the oldest go first beyond
	// it, as beyond History; the newest is kept whatever its size.
	// [defaults.HistoryBytesPerData × MaxDataBytes: 32 MiB]
	HistoryBytes int
	// OnMessage applies a message (Driver.Send) to a copy of the data, kept
	// when it returns nil: applied exactly once. A refused message is tried
	// again at autosave ticks (after 1, 2, 4, then every 8 Autosave
	// periods); after MaxMessageAttempts refusals it is a dead letter.
	// [nil; defaults.MaxMessageAttempts]
	OnMessage          func(d *T, m Message) error
	MaxMessageAttempts int
	// MaxInbox bounds the messages waiting, MaxMessageBytes one body.
	// [defaults.MaxInbox, defaults.MaxMessageBytes]
	MaxInbox, MaxMessageBytes int
	// IdempotencyWindow: how long a Send's IdempotencyKey is remembered
	// (and always while its message waits or is a dead letter);
	// MaxIdempotencyKeys: how many, beyond which a new keyed Send is refused
	// (ErrTooManyIdempotencyKeys). [a day, defaults.MaxIdempotencyKeys]
	IdempotencyWindow  time.Duration
	MaxIdempotencyKeys int
	MaxDataBytes       int // bound of one encoded profile (ErrTooLarge) [defaults.MaxDataBytes]
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
	// and released like a leave. [defaults.MoveHold]
	MoveHold time.Duration
}

// withDefaults returns c with zero fields set to their defaults, or an error
// wrapping ErrInvalidConfig.
func (c Config[T]) withDefaults() (Config[T], error) {
	if err := validName(c.Name); err != nil {
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
		c.LockWait = defaults.LockWait
	}
	if c.MoveHold == 0 {
		c.MoveHold = defaults.MoveHold
	}
	if c.LockTTL == 0 {
		c.LockTTL = defaults.LockTTL
	}
	if c.LockSkew == 0 {
		c.LockSkew = defaults.LockSkew
	}
	if c.Autosave == 0 {
		c.Autosave = defaults.Autosave
	}
	if c.History == 0 {
		c.History = defaults.History
	}
	if c.History < 0 {
		c.History = 0
	}
	if c.History > defaults.MaxHistory {
		return c, fmt.Errorf("%w: History %d is more than %d", ErrInvalidConfig, c.History, defaults.MaxHistory)
	}
	if c.HistoryEvery < 0 || c.MaxInbox < 0 || c.MaxMessageBytes < 0 || c.IdempotencyWindow < 0 || c.MaxIdempotencyKeys < 0 {
		return c, fmt.Errorf("%w: HistoryEvery, MaxInbox, MaxMessageBytes, IdempotencyWindow and MaxIdempotencyKeys "+
			"must not be negative", ErrInvalidConfig)
	}
	switch {
	case c.MaxMessageAttempts == 0:
		c.MaxMessageAttempts = defaults.MaxMessageAttempts
	case c.MaxMessageAttempts < 0:
		c.MaxMessageAttempts = 0 // the scripts' "never"
	}
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = defaults.IdempotencyWindow
	}
	if c.MaxIdempotencyKeys == 0 {
		c.MaxIdempotencyKeys = defaults.MaxIdempotencyKeys
	}
	if c.HistoryEvery == 0 {
		c.HistoryEvery = defaults.HistoryEvery
	}
	if c.MaxInbox == 0 {
		c.MaxInbox = defaults.MaxInbox
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = defaults.MaxMessageBytes
	}
	if c.MaxDataBytes == 0 {
		c.MaxDataBytes = defaults.MaxDataBytes
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = defaults.HistoryBytesPerData * c.MaxDataBytes
	}
	return c, nil
}
