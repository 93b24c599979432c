package presence

import (
	"context"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// The default beat interval and beat lifetime: three beats fit in one TTL,
// so one or two lost beats never make a live server read as stopped.
const (
	DefaultBeat = 3 * time.Second
	DefaultTTL  = 10 * time.Second
)

// Errors of this package, wrapped with the reason: match them with errors.Is.
var (
	ErrInvalidConfig = presencecore.ErrInvalidConfig // a Config New refuses
	ErrJobIDInUse    = presencecore.ErrJobIDInUse    // another process beats this JobID
	ErrClosed        = presencecore.ErrClosed        // a beat after Close
	ErrShardMismatch = presencecore.ErrShardMismatch // in Reading.Err: the servers use another Shards
)

// Config configures a [Presence]. Zero values take the defaults; invalid
// values are refused by [New].
type Config struct {
	Namespace string        // the hash is "<Namespace>:CKPresence". default: ""
	JobID     string        // this server: a NATS subject token. default: none (required)
	Beat      time.Duration // the interval of the loop Start runs. default: DefaultBeat
	TTL       time.Duration // a beat's lifetime; > Beat, the same on every server. default: DefaultTTL
	Shards    int           // hashes to spread beats over; the same everywhere. default: 1
	Clock     clock.Clock   // drives the beat loop. default: the real clock
	Logger    *slog.Logger  // the beat loop's warnings. default: slog.Default()
}

// Presence beats this server's JobID and reads other servers'.
type Presence struct {
	p *presencecore.Presence
}

// New returns a Presence that beats cfg.JobID once Started or Claimed.
func New(rdb redis.UniversalClient, cfg Config) (*Presence, error) {
	p, err := presencecore.New(rdb, presencecore.Config{
		Key: presencecore.KeyFor(cfg.Namespace), JobID: cfg.JobID, Beat: cfg.Beat, TTL: cfg.TTL,
		Shards: cfg.Shards, Clock: cfg.Clock, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Presence{p: p}, nil
}

// Claim sends the first beat, waiting at most a TTL for a previous
// process's beat to lapse; ErrJobIDInUse when another process still beats.
func (p *Presence) Claim(ctx context.Context) error { return p.p.Claim(ctx) }

// Start runs the beat loop (every Config.Beat) until Close.
func (p *Presence) Start() { p.p.Start() }

// Beat sends one beat now.
func (p *Presence) Beat(ctx context.Context) error { return p.p.Beat(ctx) }

// Close stops the beat loop and waits for it (ctx bounds the wait). Reads
// keep working.
func (p *Presence) Close(ctx context.Context) error { return p.p.Close(ctx) }

// Remove deletes this server's beat after Close, at a clean shutdown: others
// read it as stopped at once, without waiting for the TTL.
func (p *Presence) Remove(ctx context.Context) error { return p.p.Remove(ctx) }

// IsAlive answers whether the server jobID is alive (our own JobID is
// always Alive, without a round trip).
func (p *Presence) IsAlive(ctx context.Context, jobID string) Status {
	return Status(p.p.IsAlive(ctx, jobID))
}

// Read is IsAlive with the details of the answer.
func (p *Presence) Read(ctx context.Context, jobID string) Reading {
	r := p.p.Read(ctx, jobID)
	return Reading{Status: Status(r.Status), ExpiresIn: r.ExpiresIn, Err: r.Err, At: r.At, LastBeat: r.LastBeat}
}

// Status is the answer to "is this server alive?".
type Status int

// Unknown: the read failed, or a missing beat proves nothing yet (Redis
// restarted less than one TTL ago); never treat it as stopped. Alive: a beat
// within the TTL. Stopped: no live beat, in a Redis run a TTL old or more.
const (
	Unknown Status = iota
	Alive
	Stopped
)

// String returns "unknown", "alive" or "stopped".
func (s Status) String() string { return presencecore.Status(s).String() }

// Reading is the full answer of one presence read.
type Reading struct {
	Status    Status
	ExpiresIn time.Duration // when Alive: the earliest the server can read Stopped
	Err       error         // when Unknown: why (nil when Redis restarted recently)
	At        time.Time     // the Redis clock's time of the read; zero when it failed
	LastBeat  time.Time     // when Stopped: the server's last beat, when known
}
