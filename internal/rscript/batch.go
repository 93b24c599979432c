package rscript

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher is a client whose Process lets up to solo calls go to Redis on
// their own at once, each on its caller's goroutine, as the client itself
// would; a call that finds solo round trips in flight waits, and when one of
// them ends every waiting call goes in the next round trip, one pipeline. So
// a few callers pay nothing for it, and many pay one write and one read of
// the network per pipeline instead of one per call, on both sides of the
// connection. Every other method is the client's own.
//
// A call still waiting when its context ends is never sent: it fails with
// the context's error at once. A call taken into a pipeline ends with it, as
// a command on the wire does: never written after its caller returned. A
// pipeline is cut short by no caller's context but by all of them: its
// context ends once every call's in it has ended, so no caller's cancel
// fails another's call, and a pipeline that hangs holds its calls no longer
// than the last of them would wait.
type Batcher struct {
	redis.UniversalClient
	solo int

	mu       sync.Mutex
	inflight int       // round trips in flight: solo calls and pipelines
	queue    []*waiter // calls waiting for the next round trip
	closed   bool      // Wait began: every call goes on its own
	runs     sync.WaitGroup
}

// waiter is one waiting call.
type waiter struct {
	ctx  context.Context
	cmd  redis.Cmder
	done chan struct{} // closed once the round trip that took cmd ended
	// Under the Batcher's mu: taken once a round trip took the call; gone
	// once its caller left it unsent.
	taken, gone bool
}

// NewBatcher returns a Batcher over rdb that lets solo calls go on their own
// at once (at least 1).
func NewBatcher(rdb redis.UniversalClient, solo int) *Batcher {
	return &Batcher{UniversalClient: rdb, solo: max(solo, 1)}
}

// Process runs cmd: at once when fewer than solo round trips are in flight,
// else in the next pipeline. It returns cmd's error: ctx's when ctx ended
// before cmd was sent.
func (b *Batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	b.mu.Lock()
	if b.inflight < b.solo && len(b.queue) == 0 || b.closed {
		b.inflight++
		b.mu.Unlock()
		err := b.UniversalClient.Process(ctx, cmd)
		b.next()
		return err
	}
	w := &waiter{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.done:
		return cmd.Err()
	case <-ctx.Done():
	}
	b.mu.Lock()
	if !w.taken {
		w.gone = true
		b.mu.Unlock()
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
	b.mu.Unlock()
	<-w.done
	return cmd.Err()
}

// next ends a round trip: the calls waiting, if any, go in the next one.
func (b *Batcher) next() {
	b.mu.Lock()
	batch := make([]*waiter, 0, len(b.queue))
	for _, w := range b.queue {
		if !w.gone {
			w.taken = true
			batch = append(batch, w)
		}
	}
	clear(b.queue)
	b.queue = b.queue[:0]
	if len(batch) == 0 {
		b.inflight--
		b.mu.Unlock()
		return
	}
	b.runs.Add(1)
	b.mu.Unlock()
	go b.run(batch)
}

// run sends batch in one round trip, wakes its callers and ends the round
// trip.
func (b *Batcher) run(batch []*waiter) {
	defer b.runs.Done()
	ctx, stop := batchContext(batch)
	if len(batch) == 1 {
		_ = b.UniversalClient.Process(ctx, batch[0].cmd)
	} else {
		p := b.UniversalClient.Pipeline()
		for _, w := range batch {
			_ = p.Process(ctx, w.cmd)
		}
		_, _ = p.Exec(ctx)
	}
	stop()
	for _, w := range batch {
		close(w.done)
	}
	b.next()
}

// batchContext is the context of a pipeline: the first call's values,
// done once every call's context is done, and the latest of their
// deadlines (none when one of them has none), by which a client that
// bounds its reads by the context's deadline stops waiting for an answer.
// stop releases it.
func batchContext(batch []*waiter) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	bc := &pipelineCtx{Context: ctx, hasDeadline: true}
	for _, w := range batch {
		if w.ctx.Done() == nil {
			// It never ends, nor does the pipeline but by the client's own
			// timeouts.
			return ctx, cancel
		}
		if d, ok := w.ctx.Deadline(); !ok {
			bc.hasDeadline = false
		} else if d.After(bc.deadline) {
			bc.deadline = d
		}
	}
	if !bc.hasDeadline {
		bc.deadline = time.Time{}
	}
	var left atomic.Int32
	left.Store(int32(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, w := range batch {
		stops[i] = context.AfterFunc(w.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return bc, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// pipelineCtx is a pipeline's context: its Done and values, and the latest
// deadline of its calls.
type pipelineCtx struct {
	context.Context
	deadline    time.Time
	hasDeadline bool
}

// Deadline is the latest deadline of the pipeline's calls.
func (c *pipelineCtx) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }

// Wait sends every later call on its own and waits, at most until ctx ends,
// for the pipelines in flight to end. It does not close the client.
func (b *Batcher) Wait(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.runs.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
