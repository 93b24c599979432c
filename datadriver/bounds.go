package datadriver

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// boundShare is the part of a call's bound that calls may share: the calls
// bounded by d that start within d/boundShare of each other end at one
// deadline, the first one's, so each ends at most d/boundShare before its
// own now+d, never after it (10 ms of the default SaveTimeout).
const boundShare = 1000

// callBounds bounds the Redis calls of a Node (SaveTimeout, and with
// ReplicaTimeout) without a context and a timer of each call's own where
// the call's context cannot end by itself: a Save or a Release under
// context.Background(), a Join's acquire under one (see endsWith), the
// executors' own writes (an autosave: sharesBounds). Such
// calls share one deadline context per bound and base, made afresh when the
// last one's deadline is too early for a new call, and each call sees its
// own context's values (boundCtx). A context whose own deadline comes
// within the bound needs none. Another that can end shares likewise once
// it is the caller's context of two calls of the same bound in a row (a
// server's context, cancelled at its shutdown, that every Save passes):
// the shared deadline is made under it, so it ends with it too
// (callerShare). Any other is bounded by a context.WithTimeout of its own.
// Every deadline is on the Node's clock.
//
// What it saves, measured on the session cycle (load, save, release under
// context.Background(), BenchmarkCycle): 3 timers and about 20 of the
// cycle's allocations.
type callBounds struct {
	clock clock.Clock
	mu    sync.Mutex
	// shared holds the current context of each bound and base (a nil base
	// never ends; else a Driver's loads context, see endsWith, its
	// context, see sharesBounds, or a caller's, see callers).
	shared map[boundKey]*sharedBound
	// callers holds, for each bound, the one caller context that can end
	// whose calls share their deadlines, and the last other one seen.
	callers map[time.Duration]*callerShare
}

// callerShare is which caller context that can end shares the deadlines
// of one bound: ctx (its shared deadline is shared[{ctx, bound}]), until
// another is the context of two calls in a row (seen, then again). Both
// are pointers (compared by identity); each is held until replaced.
type callerShare struct {
	ctx, seen context.Context
}

// boundKey names a shared deadline: the bound, and what else ends it.
type boundKey struct {
	base context.Context
	d    time.Duration
}

// sharedBound is a shared deadline context and its deadline.
type sharedBound struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

// boundCtx is a context that ends as its embedded Context (a shared
// deadline, or a Driver's loads context) and carries vals' values: vals
// never ends by itself (its Done is nil), so nothing of it is lost. A key
// vals has no value for is looked up in the embedded context (the
// context package's own keys, which vals hides, among them).
type boundCtx struct {
	context.Context
	vals context.Context
	base context.Context // the Driver context the embedded one ends with; nil: none
	// own: vals are base's own values (sharesBounds), so a context made
	// under base carries them already.
	own bool
}

// Value is vals' value of key, else the embedded context's.
func (c *boundCtx) Value(key any) any {
	if v := c.vals.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// endsWith is ctx ending also when base (a Driver's long-lived context)
// ends, as context.WithCancel and context.AfterFunc would make it, but
// without either when ctx never ends by itself (one small object); ok is
// false when ctx can end (the caller merges the two itself).
func endsWith(ctx, base context.Context) (_ context.Context, ok bool) {
	if ctx.Done() != nil {
		return nil, false
	}
	return &boundCtx{Context: base, vals: ctx, base: base}, true
}

// sharesBounds is base (a Driver's long-lived context) as a context whose
// calls share their deadlines (within), ending with base. It carries base's
// values, the context package's keys aside (looked up in base itself).
func sharesBounds(base context.Context) context.Context {
	return &boundCtx{Context: base, vals: context.WithoutCancel(base), base: base, own: true}
}

// within returns the context of one call under ctx that must end within d
// from now, and its cancel. A ctx whose deadline comes by then is the
// call's as it is; one that never ends by itself (or ends only with a
// Driver's context, through endsWith) shares a deadline with the calls of
// the same bound started up to d/boundShare before; one that can end does
// likewise, under itself, while it is the bound's sharing caller context
// (callerShare), and gets a clock.WithTimeout of its own otherwise.
func (b *callBounds) within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	now := b.clock.Now()
	vals, base, plain := ctx, context.Context(nil), ctx == context.Background() || ctx == context.TODO()
	caller := false
	if c, ok := ctx.(*boundCtx); ok && c.base != nil && c.Context == c.base && c.base.Err() == nil {
		vals, base, plain = c.vals, c.base, c.own
	} else if dl, ok := ctx.Deadline(); ok && !dl.After(now.Add(d)) {
		return ctx, func() {} // it ends by then already
	} else if d/boundShare <= 0 {
		return b.clock.WithTimeout(ctx, d)
	} else if ctx.Done() != nil {
		if _, ok := ctx.(*boundCtx); ok || reflect.TypeOf(ctx).Kind() != reflect.Pointer {
			// (a Driver's that has ended: its shared ones are forgotten; a
			// context that is not a pointer may not compare)
			return b.clock.WithTimeout(ctx, d)
		}
		// The shared deadline is made under ctx: it has ctx's values.
		base, plain, caller = ctx, true, true
	}
	k := boundKey{base: base, d: d}
	b.mu.Lock()
	if caller && !b.callerSharesLocked(ctx, d) {
		b.mu.Unlock()
		return b.clock.WithTimeout(ctx, d)
	}
	s := b.shared[k]
	if s == nil || s.at.After(now.Add(d)) || !s.at.After(now.Add(d-d/boundShare)) || s.ctx.Err() != nil {
		parent := base
		if parent == nil {
			parent = context.Background()
		}
		s = &sharedBound{at: now.Add(d)}
		s.ctx, s.cancel = b.clock.WithDeadline(parent, s.at)
		if b.shared == nil {
			b.shared = make(map[boundKey]*sharedBound)
		}
		b.shared[k] = s // the one before ends by its own deadline
	}
	b.mu.Unlock()
	if plain { // no values but its parent's: the shared context is the call's as it is
		return s.ctx, func() {}
	}
	return &boundCtx{Context: s.ctx, vals: vals}, func() {}
}

// callerSharesLocked says whether the calls of bound d under ctx (a
// pointer context that can end) share their deadline: ctx is the bound's
// sharing caller context, or is now, having been the last one seen too
// (the one it replaces stops sharing; its calls in flight keep their
// deadline, which ends by itself). Else ctx is remembered as seen. Called
// with b.mu held.
func (b *callBounds) callerSharesLocked(ctx context.Context, d time.Duration) bool {
	c := b.callers[d]
	if c == nil {
		if b.callers == nil {
			b.callers = make(map[time.Duration]*callerShare)
		}
		c = &callerShare{}
		b.callers[d] = c
	}
	switch ctx {
	case c.ctx:
		return true
	case c.seen:
		if c.ctx != nil {
			delete(b.shared, boundKey{base: c.ctx, d: d})
		}
		c.ctx, c.seen = ctx, nil
		return true
	}
	c.seen = ctx
	return false
}

// forget drops the shared deadlines that end with base (a Driver's
// context, at its shutdown), cancelling the current one: a call still
// under it ends then, as under base itself.
func (b *callBounds) forget(base context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, s := range b.shared {
		if k.base == base {
			s.cancel()
			delete(b.shared, k)
		}
	}
}
