package handoffcore

import (
	"context"
	"slices"
	"sync"

	"github.com/ckernel/playerdata/messaging"
)

// asking is one AskAll in progress: the servers it waits on.
type asking struct {
	mu      sync.Mutex
	pending map[string]bool // asked, not answered yet
	wake    chan struct{}   // buffered 1: an answer came
}

// AskAll asks each of jobs to release key of driver if it holds the lock
// token, and returns the servers that answered, sorted. A server that
// holds the lock under that token releases it (a save and a release, as
// for any request) and then answers; one that does not answers at once: so
// every server that answered holds no lock under that token now, and never
// will (a token is made once, by the acquisition that wrote it). The
// request repeats every RequestRepeat to a server that has not answered.
// It returns once every server answered, or when ctx ends (with those that
// had). This is how an operator learns that no live server holds the token
// of a lock that names no holder (a broken lock.job). Without a Bus
// nothing is sent and nobody answers.
func (h *Handoff) AskAll(ctx context.Context, driver, key, token string, jobs []string) []string {
	a := &asking{pending: make(map[string]bool), wake: make(chan struct{}, 1)}
	for _, j := range jobs {
		if j != h.cfg.JobID {
			a.pending[j] = true
		}
	}
	wk := waitKey{driver, key}
	h.mu.Lock()
	if h.asks == nil {
		h.asks = make(map[waitKey]map[*asking]struct{})
	}
	if h.asks[wk] == nil {
		h.asks[wk] = make(map[*asking]struct{})
	}
	h.asks[wk][a] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.asks[wk], a)
		if len(h.asks[wk]) == 0 {
			delete(h.asks, wk)
		}
		h.mu.Unlock()
	}()
	for {
		a.mu.Lock()
		left := make([]string, 0, len(a.pending))
		for j := range a.pending {
			left = append(left, j)
		}
		a.mu.Unlock()
		if len(left) == 0 || h.cfg.Bus == nil {
			break
		}
		slices.Sort(left)
		for _, j := range left {
			h.request(ctx, driver, key, j, token, "")
		}
		if !a.await(ctx, h) {
			break
		}
	}
	var answered []string
	a.mu.Lock()
	for _, j := range jobs {
		if j != h.cfg.JobID && !a.pending[j] {
			answered = append(answered, j)
		}
	}
	a.mu.Unlock()
	slices.Sort(answered)
	return answered
}

// await waits until every server answered (true), RequestRepeat passed
// (true: ask again), or ctx ended (false).
func (a *asking) await(ctx context.Context, h *Handoff) bool {
	t := h.cfg.Clock.Timer(h.cfg.RequestRepeat)
	defer t.Stop()
	for {
		a.mu.Lock()
		done := len(a.pending) == 0
		a.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-a.wake:
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// answeredLocked routes a reply to the AskAlls on its key: each that was
// waiting for its sender no longer does, and its wake channel is appended
// to wake (the caller sends on them once h.mu is released). h.mu is held.
func (h *Handoff) answeredLocked(m messaging.Message, wake []chan struct{}) []chan struct{} {
	for a := range h.asks[waitKey{m.Driver, m.Key}] {
		a.mu.Lock()
		if a.pending[m.Sender] {
			delete(a.pending, m.Sender)
			wake = append(wake, a.wake)
		}
		a.mu.Unlock()
	}
	return wake
}
