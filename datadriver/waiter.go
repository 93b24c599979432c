package datadriver

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// Park bounds between acquire attempts on another server's lock (the
// reference design's 0.5 s doubling to 2 s).
const (
	parkMin = 500 * time.Millisecond
	parkMax = 2 * time.Second
)

// pollWaiter waits on another server's lock by polling: it parks parkMin,
// doubling to parkMax, until its deadline. It asks nobody and proves
// nothing: the lock changes hands only by release or by age.
type pollWaiter struct {
	clock    clock.Clock
	deadline time.Time
	park     time.Duration
}

var _ lockWaiter = (*pollWaiter)(nil)

func (w *pollWaiter) next(ctx context.Context, _ lockState) (attempt, error) {
	left := w.deadline.Sub(w.clock.Now())
	if left <= 0 {
		return attempt{}, errDeadline
	}
	park := min(w.park, left)
	w.park = min(w.park*2, parkMax)
	t := w.clock.Timer(park)
	defer t.Stop()
	select {
	case <-t.C:
		return attempt{}, nil
	case <-ctx.Done():
		return attempt{}, ctx.Err()
	}
}

func (w *pollWaiter) close() {}
