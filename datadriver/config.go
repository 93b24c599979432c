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

// NodeConfig configures a Node: one per game-server process. A zero field
// takes the default its "default:" line names; an invalid value is refused
// (ErrInvalidConfig). The fields come in groups: the server, saves,
// presence, the bus and handoff, telemetry.
type NodeConfig struct {
	// Redis holds the records and the presence hash (one Redis, Sentinel or
	// Cluster; a Ring is refused: it moves keys between shards); JobID
	// names this server in lock records and on the bus (a NATS subject
	// token; refused while another process beats it); Namespace prefixes
	// every Redis key and bus subject.
	// default: none (required), a random "anon-…", none
	Redis     redis.UniversalClient
	JobID     string
	Namespace string
	// Clock drives every timer; Logger is the Node's log; Entropy is the
	// source of lock tokens, which must be unpredictable (a fixed one replays
	// a simulation).
	// default: clock.New(), slog.Default(), ChaCha8 seeded from crypto/rand
	Clock   clock.Clock
	Logger  *slog.Logger
	Entropy io.Reader
	// PingTimeout bounds NewNode's first PING of Redis and NATS;
	// AcceptEviction starts on a Redis whose maxmemory-policy is allkeys-*
	// (an evicted record reads as a new profile) instead of refusing it.
	// default: 2 s, false
	PingTimeout    time.Duration
	AcceptEviction bool

	// Saves: SaveTimeout bounds each acquire, save and release (calls
	// under a context that never ends, or under one that can end passed to
	// two calls in a row, share one deadline per SaveTimeout/1000: each
	// ends at most that much before its own, never after);
	// MaxConcurrentSaves the autosaves at once, and the goroutines that run
	// a driver's ticks (autosaves, lock refreshes; more wait in order, a
	// game's own calls never do); TradeRetain keeps a settled
	// trade's journal entry; MinReplicas makes acquisitions, releases,
	// Saves, trade commits and Sends wait (at most ReplicaTimeout) for that
	// many replicas, else ErrNotReplicated.
	// default: 10 s, 16, a day, 0, 1 s
	SaveTimeout        time.Duration
	MaxConcurrentSaves int
	TradeRetain        time.Duration
	MinReplicas        int
	ReplicaTimeout     time.Duration
	// SoloCalls is how many acquires, saves and releases of the Node go to
	// Redis on their own at once; more wait, and when one of those ends
	// they go together in one pipeline (one round trip, one write and read
	// of the network for all: less CPU on both sides under load). Each is
	// still its own fenced script, bounded by its own context. On a Redis
	// Cluster client each master counts its own: a pipeline goes to one
	// master, and a master that stalls holds no call to another. Negative:
	// every call on its own.
	// default: 8
	SoloCalls int

	// Presence (docs/self-fencing.md): PresenceRedis carries the beats and
	// presence reads apart from saves; PresenceKey names the hash and
	// PresenceShards splits it (the same count on every server); Beat is the
	// beat period, PresenceTTL how long a beat keeps a server alive,
	// FenceMargin how much earlier its sessions end.
	// default: a client made from Redis's options (pool 4), "CKPresence", 1,
	// 3 s, 10 s, Beat
	PresenceRedis                  redis.UniversalClient
	PresenceKey                    string
	PresenceShards                 int
	Beat, PresenceTTL, FenceMargin time.Duration

	// Bus and handoff (docs/bus.md): NATS carries requests and message
	// notifications on "<Namespace>.<SubjectPrefix>.<JobID>" (Bus replaces
	// it; with neither, joins poll). DisableHandoff: no subscription, and
	// locks without the presence flag (moved by release or age only). A
	// waiting join repeats its request every RequestRepeat and parks
	// between ParkMin and ParkMax.
	// default: none, none, "CKHandoff", false, 4 s, 0.5 s, 2 s
	NATS                            *nats.Conn
	Bus                             messaging.Bus
	SubjectPrefix                   string
	DisableHandoff                  bool
	RequestRepeat, ParkMin, ParkMax time.Duration
	// RequestKey signs every message between servers (HMAC-SHA256, ≥ 16
	// bytes, NATS only); RequestKeyOptional also accepts unsigned ones
	// (rollout); RequestKeysAccepted are further keys (rotation).
	// default: none (docs/bus.md says what a peer can then do)
	RequestKey          []byte
	RequestKeyOptional  bool
	RequestKeysAccepted [][]byte

	// Telemetry (docs/operations.md): the OpenTelemetry providers of the
	// metrics and spans.
	// default: the global providers
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// Config configures a Driver: one per kind of profile on a Node. A zero
// field takes the default its "default:" line names; an invalid value is
// refused (ErrInvalidConfig). The fields come in groups: the data, locks,
// saves and history, messages, callbacks.
type Config[T any] struct {
	// The data: Name identifies the profile kind in keys and messages
	// (unique per Node, 1 to 128 ASCII letters, digits, '_' and '-');
	// Defaults is a new profile's data, and fills the fields a stored one
	// lacks, at every depth; TagName is the struct tag of stored fields
	// ("msgpack" or "json"); AllowLossyFields accepts a T with fields that
	// do not round-trip (else NewDriver names them); Migrations upgrade
	// stored data to schema version len(Migrations); MaxDataBytes bounds one
	// encoded profile (ErrTooLarge).
	// default: none (required), the zero T, "msgpack", false, none, 4 MiB
	Name             string
	Defaults         T
	TagName          string
	AllowLossyFields bool
	Migrations       []Migration
	MaxDataBytes     int

	// Locks (docs/handoff.md): LockWait bounds Join's wait for another
	// server's lock, LocalHandoff a load's wait on this Node; a lock without
	// the presence flag may be taken once LockTTL + LockSkew old; MoveHold
	// bounds how long a profile moved here (Profile.MoveTo) waits for its
	// player's Join before it is released like a leave.
	// default: 15 s, LockWait for Join (none for Load), 180 s, 60 s, 30 s
	LockWait, LocalHandoff, LockTTL, LockSkew, MoveHold time.Duration

	// Saves and history (docs/history.md): Autosave is the background save
	// period (negative: off); History versions are kept (negative: none; at
	// most 1000), at most one per HistoryEvery, in at most HistoryBytes of
	// Redis (the oldest go first; the newest is kept whatever its size):
	// what RestoreAt can reach.
	// default: 30 s, 24, an hour, 8 × MaxDataBytes
	Autosave     time.Duration
	History      int
	HistoryEvery time.Duration
	HistoryBytes int

	// Messages (docs/messages.md): OnMessage applies a message (Driver.Send)
	// to a copy of the data, kept when it returns nil: applied exactly once.
	// A refused one is tried again at autosave ticks and is a dead letter
	// after MaxMessageAttempts refusals (negative: never). MaxInbox bounds
	// the messages waiting, MaxMessageBytes one body.
	// default: nil, 5, 1000, 64 KiB
	OnMessage                                     func(d *T, m Message) error
	MaxMessageAttempts, MaxInbox, MaxMessageBytes int
	// IdempotencyWindow is how long a Send's IdempotencyKey is remembered
	// (and always while its message waits or is a dead letter);
	// MaxIdempotencyKeys how many (ErrTooManyIdempotencyKeys beyond).
	// default: a day, 10000
	IdempotencyWindow  time.Duration
	MaxIdempotencyKeys int

	// Callbacks: Kick is called once per session the driver ends by itself,
	// OnLockLost after it for one that ends without its progress,
	// OnSaveError when a background write fails, OnSaved after each write
	// that landed, with what it stored. A key's callbacks run one at a time
	// in order, a panic recovered and logged; keys take turns on at most 8
	// goroutines, so one that blocks holds up its own key.
	// default: nil
	Kick        func(key string, reason KickReason)
	OnLockLost  func(key string, err error)
	OnSaveError func(key string, err error)
	OnSaved     func(key string, s Saved)

	// noHandoff gives this driver's locks no presence flag and has it
	// answer no requests (tests: export_test.go).
	noHandoff bool
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
