package datadriver

import (
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/messaging"
)

// Defaults of Config. They are the reference design's.
const (
	// DefaultLockWait is how long a joining player waits for another
	// server's lock (the spec's LockWaitSeconds): long enough for a holder
	// to end a stale session and save, or for a crashed holder's presence
	// to expire and be proven stopped (10 to 15 s).
	DefaultLockWait = 15 * time.Second
	// DefaultLockTTL is the lock age after which a lock without presence
	// protection is stale (LockTtlSeconds).
	DefaultLockTTL = 180 * time.Second
	// DefaultLockSkew is extra age allowed on top of LockTTL, a margin for a
	// Redis failover whose clock differs (LockSkewSeconds).
	DefaultLockSkew = 60 * time.Second
	// DefaultAutosave is the autosave period: a crash loses at most this
	// much progress.
	DefaultAutosave = 30 * time.Second
	// DefaultHistory is how many past versions a key keeps for RestoreAt
	// and ReadVersion: with HistoryEvery, a day of play.
	DefaultHistory = 24
	// MaxHistory bounds History.
	MaxHistory = 1000
	// DefaultHistoryEvery is the least time between two kept versions: long
	// enough that History versions reach back a day ("roll my profile back
	// to yesterday"), short enough to undo an hour-old mistake.
	DefaultHistoryEvery = time.Hour
	// DefaultMaxInbox bounds a profile's inbox of messages.
	DefaultMaxInbox = 1000
	// DefaultMaxMessageBytes bounds one message body: a message is a gift or
	// a grant, not a profile.
	DefaultMaxMessageBytes = 64 << 10
	// DefaultMaxMessageAttempts is how many times OnMessage may refuse a
	// message before it is dead-lettered: enough to ride out a passing
	// failure (a service the handler calls), few enough that a message that
	// can never apply stops costing every pull.
	DefaultMaxMessageAttempts = 5
	// DefaultIdempotencyWindow is how long a profile remembers a Send's
	// idempotency key: a sender retrying a failed call (a shop, a reward
	// service) does so within minutes, a batch job within a day.
	DefaultIdempotencyWindow = 24 * time.Hour
	// DefaultMaxIdempotencyKeys bounds the keys a profile remembers (the
	// oldest go first): ten inboxes' worth.
	DefaultMaxIdempotencyKeys = 10 * DefaultMaxInbox
	// DefaultMaxDataBytes bounds one encoded profile; Redis is happiest with
	// values well under its 512 MiB limit, and a profile that large is a bug.
	DefaultMaxDataBytes = 4 << 20
	// DefaultSaveTimeout bounds every save, so one stuck save never holds
	// up the others.
	DefaultSaveTimeout = 10 * time.Second
	// DefaultReplicaTimeout bounds the wait for replicas (MinReplicas): a
	// replica on the same network acknowledges within milliseconds; one
	// that takes a second is failing.
	DefaultReplicaTimeout = time.Second
	// DefaultMaxConcurrentSaves bounds the autosaves a Node runs at once.
	DefaultMaxConcurrentSaves = 16
)

// NodeConfig configures a Node: one per game-server process.
type NodeConfig struct {
	// JobID names this server in lock records and on the bus; it must be
	// valid as a NATS subject token, and NewNode refuses it (ErrJobIDInUse)
	// while another process beats it. A restarted process may keep its
	// JobID: NewNode waits at most PresenceTTL for the earlier run's beat to
	// lapse, and takes over the locks it left.
	// default: "" (a random id, "anon-" and 16 hex digits, with presence and
	// handoff like any other)
	JobID string
	// Redis holds the records and the presence hash (required). One Redis,
	// Sentinel or Cluster: any redis.UniversalClient.
	Redis redis.UniversalClient
	// Namespace prefixes every Redis key (and bus subject).
	// default: "" (no prefix)
	Namespace string
	// Clock drives every timer: autosave, waits, timeouts.
	// default: clock.New()
	Clock clock.Clock
	// Logger receives warnings (lock taken from a stopped server, failing
	// saves) and debug traces.
	// default: slog.Default()
	Logger *slog.Logger
	// SaveTimeout bounds each save and release.
	// default: DefaultSaveTimeout (10 s)
	SaveTimeout time.Duration
	// MaxConcurrentSaves bounds the autosaves running at once on this Node.
	// default: DefaultMaxConcurrentSaves (16)
	MaxConcurrentSaves int
	// Entropy is the source of lock tokens. Tokens are
	// capabilities (a request must name one to end a session), so it must be
	// unpredictable; a fixed source makes a simulation replayable.
	// default: a ChaCha8 generator seeded from crypto/rand
	Entropy io.Reader

	// NATS carries release requests between servers (subject
	// "<Namespace>.<SubjectPrefix>.<JobID>").
	// default: nil (no requests: joins poll; crashed holders are still
	// detected through presence)
	NATS *nats.Conn
	// Bus replaces NATS (tests, or another transport).
	// default: a messaging.NATSBus over NATS when NATS is set
	Bus messaging.Bus
	// DisableHandoff turns cross-server handoff off: no presence beat, no
	// subscription, locks without the presence flag (they change hands by
	// release or by age only), and no check that the JobID is free.
	// default: false
	DisableHandoff bool
	// PingTimeout bounds NewNode's first PING of Redis (a Redis that does
	// not answer within it fails NewNode with ErrRedisUnavailable) and of
	// NATS when it is given (ErrBusDown).
	// default: DefaultPingTimeout (2 s)
	PingTimeout time.Duration
	// Beat is the presence beat period (the spec's 3 s beat).
	// default: presence.DefaultBeat (3 s)
	Beat time.Duration
	// PresenceTTL is how long a beat keeps a server alive, judged on the
	// Redis clock (the spec's 10 s).
	// default: presence.DefaultTTL (10 s)
	PresenceTTL time.Duration
	// FenceMargin: a server whose last successful beat was sent more than
	// PresenceTTL - FenceMargin ago ends its sessions with ErrLockLost, since
	// other servers may already take its locks.
	// default: Beat
	FenceMargin time.Duration
	// RequestRepeat is how often a waiting join repeats its release request.
	// default: lockhandoff.DefaultRequestRepeat (4 s)
	RequestRepeat time.Duration
	// ParkMin and ParkMax bound the park between attempts on another
	// server's lock (doubling from ParkMin to ParkMax).
	// default: 0.5 s and 2 s
	ParkMin, ParkMax time.Duration
	// PresenceKey names the presence hash (under Namespace).
	// default: "CKPresence"
	PresenceKey string
	// PresenceShards splits the presence hash into this many hashes by
	// JobID (presence.ShardOf), so that no single key, nor on Redis Cluster
	// a single master, carries every server's beats: shard 0 is
	// "<Namespace>:<PresenceKey>", shard n "<Namespace>:<PresenceKey>:{n}".
	// Every server of a deployment (and the operator CLI) must use the same
	// count; change it only with every server stopped.
	// default: presence.DefaultShards (1: the single hash)
	PresenceShards int
	// SubjectPrefix prefixes handoff subjects (under Namespace).
	// default: "CKHandoff"
	SubjectPrefix string
	// TradeRetain is how long a trade's journal entry is kept once it has
	// settled (aborted, or committed with every image written).
	// default: transactions.DefaultRetain (one day)
	TradeRetain time.Duration
	// MinReplicas makes releases, explicit Saves and trade commits wait
	// (Redis WAIT) until that many replicas acknowledged the write, at most
	// ReplicaTimeout; when fewer did they return an error matching
	// ErrNotReplicated. The write stands either way: it is on the primary,
	// and is lost only if the primary fails over before replicating it. The
	// caller may go on (as after an autosave, whose loss window is the
	// same) or Save again later. Autosaves never wait.
	// default: 0 (no wait: an acknowledged write can be lost in a failover)
	MinReplicas int
	// ReplicaTimeout bounds that wait.
	// default: DefaultReplicaTimeout (1 s) when MinReplicas is set
	ReplicaTimeout time.Duration

	// MeterProvider and TracerProvider receive the Node's metrics and spans
	// (OpenTelemetry; see the README's Operations section).
	// default: nil (the global providers: no-ops until the application
	// installs an SDK)
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// RequestKey authenticates the messages between servers (HMAC-SHA256
	// over every field, the sender, the destination and a timestamp): a
	// message without a good MAC, or older than the replay window, is
	// dropped and counted. At least 16 bytes; every server of a deployment
	// uses the same key. Only with NATS (a Bus given instead carries no
	// MAC).
	// default: nil (messages are not authenticated)
	RequestKey []byte
	// RequestKeyOptional also accepts messages without a MAC (still
	// dropping those with a bad one): the first step of turning RequestKey
	// on across a running deployment, or off; see the README.
	// default: false
	RequestKeyOptional bool
	// RequestKeysAccepted are further keys a MAC may be made with (key
	// rotation: accept the new key everywhere, then sign with it).
	// default: none
	RequestKeysAccepted [][]byte
}

// Config configures a Driver: one per kind of profile on a Node.
type Config[T any] struct {
	// Name identifies the profile kind in Redis keys and handoff messages;
	// required and unique per Node.
	Name string
	// Defaults is the data of a new profile. A field a stored profile lacks
	// takes its value from Defaults, at every depth, and a map or slice
	// stored as nil becomes an empty one where Defaults has one; stored
	// values always win (a stored map replaces the default map whole).
	// default: the zero T
	Defaults T
	// TagName names the struct tag that names stored fields: "msgpack"
	// (msgpack tags, else the Go field name) or "json" (json tags where a
	// field has no msgpack tag; many game structs already carry them).
	// Changing it renames stored fields: that needs a migration.
	// default: "msgpack"
	TagName string
	// Migrations upgrade stored data to this driver's schema version,
	// len(Migrations); each record keeps the version it was written at and
	// the lowest version that may read it. See Migration.
	// default: none (schema version 0)
	Migrations []Migration
	// LockWait is the spec's LockWaitSeconds: how long Join waits for
	// another server's lock before failing closed with ErrWaitTimeout; also
	// the same-server wait when LocalHandoff is unset.
	// default: DefaultLockWait (15 s)
	LockWait time.Duration
	// LocalHandoff is the spec's LocalHandoffSeconds: how long a load waits
	// for a load or release of the same key on this server.
	// default: 0 (sessions use LockWait, manual loads do not wait)
	LocalHandoff time.Duration
	// LockTTL is the spec's LockTtlSeconds: the lock age after which a lock
	// without presence protection may be taken.
	// default: DefaultLockTTL (180 s)
	LockTTL time.Duration
	// LockSkew is the spec's LockSkewSeconds: extra age allowed on top of
	// LockTTL.
	// default: DefaultLockSkew (60 s)
	LockSkew time.Duration
	// Autosave is the period of background saves; each profile's saves are
	// offset by a phase (a hash of key, server and epoch) so they do not all
	// fall in one tick. A negative value turns autosave off; a retained
	// profile (its leave save failed) still retries its release every
	// DefaultAutosave.
	// default: DefaultAutosave (30 s)
	Autosave time.Duration
	// History is how many past versions of a key are kept for RestoreAt
	// and ReadVersion, compressed, in a hash beside the record (its own
	// key, in the record's Redis Cluster slot): a save that keeps no version
	// does not touch it. A negative value keeps none.
	// default: DefaultHistory (24)
	History int
	// HistoryEvery is the least time between two kept versions: the first
	// data write at least HistoryEvery after the last kept version keeps the
	// data it replaces. The data before every restore is kept as well.
	// default: DefaultHistoryEvery (1 h)
	HistoryEvery time.Duration
	// OnMessage applies a message sent to the profile (Driver.Send) to its
	// data. It runs on a copy of the data: when it returns an error (or
	// panics) the copy is dropped, the message stays in the inbox and is
	// tried again at the next pull. A message is removed from the inbox by
	// the very save that writes the data it changed, so it is applied
	// exactly once. Without OnMessage messages wait in the inbox.
	// default: nil
	OnMessage func(d *T, m Message) error
	// MaxInbox bounds the messages waiting for a profile: a Send beyond it
	// answers ErrInboxFull and stores nothing.
	// default: DefaultMaxInbox (1000)
	MaxInbox int
	// MaxMessageBytes bounds one encoded message body (ErrTooLarge).
	// default: DefaultMaxMessageBytes (64 KiB)
	MaxMessageBytes int
	// MaxMessageAttempts is how many times OnMessage may refuse (or panic
	// on) one message before it moves, in the script that counts the last
	// refusal, to the profile's dead letters: kept beside the record, shown
	// by `playerdata inspect`, put back by `playerdata replay`. A negative
	// value never dead-letters.
	// default: DefaultMaxMessageAttempts (5)
	MaxMessageAttempts int
	// IdempotencyWindow is how long a profile remembers the idempotency key
	// of a Send (IdempotencyKey) after it stored the message; a key is also
	// remembered, whatever the window, while its message waits in the inbox
	// or is dead-lettered. MaxIdempotencyKeys bounds how many keys one
	// profile remembers (the oldest are forgotten first).
	// default: DefaultIdempotencyWindow (24 h), DefaultMaxIdempotencyKeys (10000)
	IdempotencyWindow  time.Duration
	MaxIdempotencyKeys int
	// MaxDataBytes bounds one encoded profile. A save of larger data is
	// refused with ErrTooLarge and writes nothing; a release of it frees the
	// lock with the last data that fit (and reports ErrTooLarge), so the
	// player's next join anywhere gets that data at once.
	// default: DefaultMaxDataBytes (4 MiB)
	MaxDataBytes int
	// Kick is called (on its own goroutine) when the driver ends a live
	// session by itself, with the reason (one per cause: see KickReason).
	// The game disconnects the player (reason.Message() says why in a
	// sentence); the driver saves and releases on its own.
	// default: nil
	Kick func(key string, reason KickReason)
	// OnLockLost is called (on its own goroutine) when a profile loses its
	// lock, with an error matching ErrLockLost.
	// default: nil
	OnLockLost func(key string, err error)
	// OnSaveError is called (on its own goroutine) when a background write
	// of a live or retained profile fails: an autosave, a retried release, a
	// lock refresh (a lost lock goes to OnLockLost instead). Data over
	// MaxDataBytes arrives here as ErrTooLarge.
	// default: nil (the failure is only logged)
	OnSaveError func(key string, err error)
	// DisableHandoff turns cross-server handoff off for this driver: its
	// locks carry no presence flag, it answers no requests (a joiner
	// elsewhere waits out LockWait), and its joins only poll.
	// default: false
	DisableHandoff bool
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
	}{{"LockWait", c.LockWait}, {"LocalHandoff", c.LocalHandoff}, {"LockTTL", c.LockTTL}, {"LockSkew", c.LockSkew}} {
		if d.v < 0 {
			return c, fmt.Errorf("%w: %s is negative (%s)", ErrInvalidConfig, d.name, d.v)
		}
	}
	if c.MaxDataBytes < 0 {
		return c, fmt.Errorf("%w: MaxDataBytes is negative (%d)", ErrInvalidConfig, c.MaxDataBytes)
	}
	if c.LockWait == 0 {
		c.LockWait = DefaultLockWait
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
	return c, nil
}

// ValidName reports whether name can name a driver (it appears in Redis keys
// and handoff messages): an error wrapping ErrInvalidConfig when it is empty,
// longer than 128 bytes, not UTF-8, or has control characters or braces (they
// delimit the record's hash tag).
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: Name is required", ErrInvalidConfig)
	case len(name) > 128:
		return fmt.Errorf("%w: Name is %d bytes, more than 128", ErrInvalidConfig, len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: Name is not valid UTF-8", ErrInvalidConfig)
	}
	for _, r := range name {
		switch {
		case r == '{' || r == '}':
			return fmt.Errorf("%w: Name %q contains a brace", ErrInvalidConfig, name)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: Name %q contains control character %U", ErrInvalidConfig, name, r)
		}
	}
	return nil
}
