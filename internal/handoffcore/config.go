package handoffcore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
)

// The reference design's timings.
const (
	// DefaultRequestRepeat: a waiting joiner repeats its release request
	// this often, in case one was lost.
	DefaultRequestRepeat = 4 * time.Second
	// DefaultParkMin is the first park between acquire attempts.
	DefaultParkMin = 500 * time.Millisecond
	// DefaultParkMax caps the doubling park.
	DefaultParkMax = 2 * time.Second
)

// Presence is what a Handoff reads of the presence hash: whether a holder
// still beats (*presencecore.Presence implements it). Beating this server's own
// presence is its owner's business (the Node's), not the Handoff's.
type Presence interface {
	Read(ctx context.Context, jobID string) presencecore.Reading
}

var _ Presence = (*presencecore.Presence)(nil)

// Config configures a Handoff.
type Config struct {
	// JobID is this server (required).
	JobID string
	// Bus carries requests and replies.
	// default: nil (no requests: waits poll, locks move by release, crash
	// proof or age)
	Bus messaging.Bus
	// Presence reads the presence hash, to tell live holders from stopped
	// ones (required).
	Presence Presence
	// Beat is the presence beat: two stopped reads at least this far apart
	// prove a holder stopped.
	// default: presencecore.DefaultBeat (3 s)
	Beat time.Duration
	// RequestRepeat is how often a waiting joiner repeats its request.
	// default: DefaultRequestRepeat (4 s)
	RequestRepeat time.Duration
	// ParkMin and ParkMax bound the park between attempts (doubling).
	// default: DefaultParkMin (0.5 s), DefaultParkMax (2 s)
	ParkMin, ParkMax time.Duration
	// Clock drives every timer.
	// default: clock.New()
	Clock clock.Clock
	// Logger receives warnings and debug traces.
	// default: slog.Default()
	Logger *slog.Logger
	// Trace observes the messages and presence reads (a Node gives its
	// telemetry's).
	// default: nil (nothing observed)
	Trace *Trace
}

func (c Config) withDefaults() (Config, error) {
	if c.JobID == "" {
		return c, fmt.Errorf("%w: JobID is required", ErrInvalidConfig)
	}
	if c.Presence == nil {
		return c, fmt.Errorf("%w: Presence is required", ErrInvalidConfig)
	}
	if c.Beat < 0 || c.RequestRepeat < 0 || c.ParkMin < 0 || c.ParkMax < 0 {
		return c, fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	if c.Beat == 0 {
		c.Beat = presencecore.DefaultBeat
	}
	if c.RequestRepeat == 0 {
		c.RequestRepeat = DefaultRequestRepeat
	}
	if c.ParkMin == 0 {
		c.ParkMin = DefaultParkMin
	}
	if c.ParkMax == 0 {
		c.ParkMax = DefaultParkMax
	}
	if c.ParkMax < c.ParkMin {
		return c, fmt.Errorf("%w: ParkMax %s < ParkMin %s", ErrInvalidConfig, c.ParkMax, c.ParkMin)
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
