package lockhandoff

import (
	"context"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/presence"
)

// The pace of a Wait: it repeats its request every DefaultRequestRepeat, in
// case one was lost, and parks between attempts from DefaultParkMin,
// doubling up to DefaultParkMax.
const (
	DefaultRequestRepeat = 4 * time.Second
	DefaultParkMin       = 500 * time.Millisecond
	DefaultParkMax       = 2 * time.Second
)

// Errors of this package, wrapped with the reason: match them with errors.Is.
var (
	ErrDeadline        = handoffcore.ErrDeadline        // the holder neither let go nor was proven stopped
	ErrDuplicateDriver = handoffcore.ErrDuplicateDriver // Register of a name already registered
	ErrInvalidConfig   = handoffcore.ErrInvalidConfig   // a Config New refuses, a nil ReleaseFunc
)

// Presence reads whether a server still beats; *presence.Presence is one.
type Presence interface {
	Read(ctx context.Context, jobID string) presence.Reading
}

// Config configures a Handoff. Zero values take the defaults.
type Config struct {
	JobID    string        // this server. default: none (required)
	Bus      messaging.Bus // carries requests and replies. default: nil (a Wait only polls)
	Presence Presence      // tells live holders from stopped ones. default: none (required)
	Beat     time.Duration // two stopped reads this far apart prove a stop. default: presence.DefaultBeat

	RequestRepeat, ParkMin, ParkMax time.Duration // default: DefaultRequestRepeat, DefaultParkMin, DefaultParkMax
	Clock                           clock.Clock   // drives every timer. default: the real clock
	Logger                          *slog.Logger  // default: slog.Default()
}

// Handoff is one server's lock handoff; Close it after its locks are released.
type Handoff struct {
	h *handoffcore.Handoff
}

// New creates a Handoff; it does nothing until Start.
func New(cfg Config) (*Handoff, error) {
	c := handoffcore.Config{JobID: cfg.JobID, Bus: cfg.Bus, Beat: cfg.Beat, RequestRepeat: cfg.RequestRepeat,
		ParkMin: cfg.ParkMin, ParkMax: cfg.ParkMax, Clock: cfg.Clock, Logger: cfg.Logger}
	if cfg.Presence != nil {
		c.Presence = reader{cfg.Presence}
	}
	h, err := handoffcore.New(c)
	if err != nil {
		return nil, err
	}
	return &Handoff{h: h}, nil
}

// Start subscribes to this server's subject (on failure, waits poll).
func (h *Handoff) Start() { h.h.Start() }

// Close unsubscribes and waits for messages in flight (bounded by ctx).
func (h *Handoff) Close(ctx context.Context) error { return h.h.Close(ctx) }

// ReleaseFunc starts letting key go when another server asks, naming the
// lock token it saw (purpose: "" for a join), and returns at once a channel
// closed once that lock is no longer held; then the Handoff replies.
type ReleaseFunc func(key, token, purpose string) <-chan struct{}

// Register routes the requests for driver's locks to release.
func (h *Handoff) Register(driver string, release ReleaseFunc) error {
	return h.h.Register(driver, handoffcore.Handlers{Release: handoffcore.ReleaseFunc(release)})
}

// Unregister stops routing requests to driver.
func (h *Handoff) Unregister(driver string) { h.h.Unregister(driver) }

// Stats returns the handoff's counters.
func (h *Handoff) Stats() Stats { return Stats(h.h.Stats()) }

// NewWait starts waiting on the lock of key of driver until deadline.
func (h *Handoff) NewWait(driver, key string, deadline time.Time) *Wait {
	return &Wait{w: h.h.NewWait(driver, key, deadline, true)}
}

// Wait is one load waiting on another server's lock (one goroutine's).
type Wait struct {
	w *handoffcore.Wait
}

// Lock is the lock an acquire found held by another server.
type Lock struct {
	Job      string        // the holder's JobID
	Token    string        // the lock token
	Presence bool          // the holder beats presence for this lock
	Age      time.Duration // since the lock was last written
}

// Attempt is what the next acquire may claim: when set, the lock of a holder
// proven stopped after it was written, to take if it still names that
// token and carries the presence flag.
type Attempt struct {
	StealJob, StealToken string
}

// Next asks the holder of l to let go and returns when an acquire should be
// tried again, ErrDeadline at the deadline, or ctx's error.
func (w *Wait) Next(ctx context.Context, l Lock) (Attempt, error) {
	a, err := w.w.Next(ctx, handoffcore.Lock(l))
	return Attempt(a), err
}

// Close ends the wait.
func (w *Wait) Close() { w.w.Close() }

// Stats counts what a Handoff did (docs/bus.md says when each drop happens).
// A message sent is counted as it goes to the bus, so a Stats read after
// what the message caused (its reply, say) counts it; a send that fails is
// taken back.
type Stats struct {
	RequestsSent, RequestsReceived                  uint64
	RepliesSent, RepliesReceived                    uint64 // received: replies that woke a wait
	PublishFailed, PublishDropped                   uint64 // dropped: at a full publish queue
	DroppedUnknownDriver, DroppedUnwaited           uint64 // for no driver here; replies no wait expects
	RepliesCoalesced, RepliesDropped, ProvenStopped uint64
	NotifiesSent, NotifiesReceived                  uint64 // "a message is in the inbox of this key"
	MovesSent, MovesReceived                        uint64 // the steps of moves between servers
}

// reader reads a Presence for the handoff.
type reader struct{ p Presence }

func (r reader) Read(ctx context.Context, jobID string) presencecore.Reading {
	x := r.p.Read(ctx, jobID)
	return presencecore.Reading{Status: presencecore.Status(x.Status), ExpiresIn: x.ExpiresIn, Err: x.Err, At: x.At,
		LastBeat: x.LastBeat}
}
