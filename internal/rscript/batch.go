package rscript

import (
	"context"
	"errors"
	"fmt"
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
// Over a Redis Cluster client each master has its own lane: its own solo
// calls and its own queue, so that a pipeline goes to one master and a
// master that stalls holds no call to another (a call's master is the
// client's for its first key, as the cluster state last said; the client
// still follows a redirection).
//
// A call still waiting when its context ends is never sent: it fails with
// the context's error at once. A call taken into a pipeline ends with it, as
// a command on the wire does: never written after its caller returned. A
// pipeline ends by the earliest of its calls' deadlines (a Redis that slow
// fails every call in it, none waits past its own deadline), and is cut
// short by no caller's cancel: only once every call in it was cancelled.
type Batcher struct {
	redis.UniversalClient
	solo    int
	cluster *redis.ClusterClient // nil: one lane

	mu     sync.Mutex
	lanes  map[string]*lane // by master's address ("" without a cluster)
	closed bool             // Wait began: every call goes on its own
	pipes  int              // pipelines in flight (run's goroutines)
	// drained is closed when pipes falls to 0 after Wait made it.
	drained chan struct{}
}

// lane is the round trips to one master (kept once made: one per master
// address the cluster ever named).
type lane struct {
	inflight int       // round trips in flight: solo calls and pipelines
	queue    []*waiter // calls waiting for the next round trip
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
	cc, _ := rdb.(*redis.ClusterClient)
	return &Batcher{UniversalClient: rdb, solo: max(solo, 1), cluster: cc, lanes: map[string]*lane{}}
}

// laneName is the lane of cmd: its first key's master on a cluster ("" when
// the cluster state cannot say), else "".
func (b *Batcher) laneName(ctx context.Context, cmd redis.Cmder) string {
	if b.cluster == nil {
		return ""
	}
	key := firstKey(cmd)
	if key == "" {
		return ""
	}
	m, err := b.cluster.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// Process runs cmd: at once when fewer than solo round trips are in flight
// on its lane, else in the lane's next pipeline. It returns cmd's error:
// ctx's when ctx ended before cmd was sent.
func (b *Batcher) Process(ctx context.Context, cmd redis.Cmder) error {
	name := b.laneName(ctx, cmd)
	b.mu.Lock()
	l := b.lanes[name]
	if l == nil {
		l = &lane{}
		b.lanes[name] = l
	}
	if l.inflight < b.solo && len(l.queue) == 0 || b.closed {
		l.inflight++
		b.mu.Unlock()
		defer b.next(l, false) // even if a hook panics
		return b.UniversalClient.Process(ctx, cmd)
	}
	w := &waiter{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	l.queue = append(l.queue, w)
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

// next ends a round trip of lane l (a pipeline's when fromPipe): the calls
// waiting there, if any, go in the next one.
func (b *Batcher) next(l *lane, fromPipe bool) {
	b.mu.Lock()
	batch := make([]*waiter, 0, len(l.queue))
	for _, w := range l.queue {
		if !w.gone {
			w.taken = true
			batch = append(batch, w)
		}
	}
	clear(l.queue)
	l.queue = l.queue[:0]
	if len(batch) == 0 {
		l.inflight--
		if fromPipe {
			b.pipes--
			if b.pipes == 0 && b.drained != nil {
				close(b.drained)
				b.drained = nil
			}
		}
		b.mu.Unlock()
		return
	}
	if !fromPipe {
		b.pipes++
	}
	b.mu.Unlock()
	go b.run(l, batch)
}

// run sends batch in one round trip, wakes its callers and ends the round
// trip of lane l.
func (b *Batcher) run(l *lane, batch []*waiter) {
	ctx, stop := batchContext(batch)
	b.send(ctx, batch)
	stop()
	for _, w := range batch {
		close(w.done)
	}
	b.next(l, true)
}

// send sends batch: alone, or in one pipeline. A panic on the way (a
// client's hook) fails every call in it instead of the process.
func (b *Batcher) send(ctx context.Context, batch []*waiter) {
	defer func() {
		if r := recover(); r != nil {
			for _, w := range batch {
				w.cmd.SetErr(fmt.Errorf("rscript: a pipeline of %d calls panicked: %v", len(batch), r))
			}
		}
	}()
	if len(batch) == 1 {
		_ = b.UniversalClient.Process(ctx, batch[0].cmd)
		return
	}
	p := b.UniversalClient.Pipeline()
	for _, w := range batch {
		_ = p.Process(ctx, w.cmd)
	}
	_, _ = p.Exec(ctx)
}

// batchContext is the context of a pipeline: the first call's values, the
// earliest of the calls' deadlines, ended (with context.DeadlineExceeded)
// as soon as one call's deadline passes, or (context.Canceled) once every
// call's context was cancelled. So no call waits on it past its own
// deadline, and no caller's cancel ends another's call. stop releases it.
func batchContext(batch []*waiter) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(batch[0].ctx))
	pc := &pipelineCtx{Context: ctx}
	var left atomic.Int32
	left.Store(int32(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, w := range batch {
		if d, ok := w.ctx.Deadline(); ok && (!pc.hasDeadline || d.Before(pc.deadline)) {
			pc.deadline, pc.hasDeadline = d, true
		}
		if w.ctx.Done() == nil {
			continue // never ends: the pipeline is never cancelled by all
		}
		stops = append(stops, context.AfterFunc(w.ctx, func() {
			switch {
			case errors.Is(w.ctx.Err(), context.DeadlineExceeded):
				cancel(context.DeadlineExceeded)
			case left.Add(-1) == 0:
				cancel(context.Canceled)
			}
		}))
	}
	return pc, func() {
		for _, s := range stops {
			s()
		}
		cancel(context.Canceled)
	}
}

// pipelineCtx is a pipeline's context (see batchContext).
type pipelineCtx struct {
	context.Context
	deadline    time.Time
	hasDeadline bool
}

// Deadline is the earliest deadline of the pipeline's calls.
func (c *pipelineCtx) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }

// Err is why the pipeline's context ended: a call's deadline passed
// (context.DeadlineExceeded), or every call was cancelled.
func (c *pipelineCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}

// Wait sends every later call on its own and waits, at most until ctx ends,
// for the pipelines in flight to end. It does not close the client.
func (b *Batcher) Wait(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	if b.pipes == 0 {
		b.mu.Unlock()
		return nil
	}
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	drained := b.drained
	b.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
