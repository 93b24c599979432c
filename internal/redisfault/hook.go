// Package redisfault is a go-redis hook that fails, stalls or loses the
// answer of chosen commands: the fault hook of the tests (testsupport
// re-exports it as FaultHook) and of the program's demo.
package redisfault

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrInjected is the error a Hook answers for an injected failure.
var ErrInjected = errors.New("injected fault")

// Hook is a go-redis hook that lets a test fail, stall or lose the
// answer of chosen commands. Add it with client.AddHook. Each fault is
// optional; the zero Hook passes everything through.
//
//   - Before runs before a command is sent: a non-nil error fails the
//     command without sending it (the backend is down).
//   - After runs once the command has run, with the error it answered: a
//     non-nil error replaces its answer (the command landed but its answer
//     was lost).
//
// In a pipeline, Before and After act on each command, in order: one that
// Before fails is not sent, the others go in one pipeline. A transaction
// (MULTI … EXEC) is passed through untouched by them: it goes whole or not
// at all.
//
// Hold is the third kind of fault, a call that hangs: while the hook is
// held, every command and pipeline waits, unsent, until Release or until its
// context ends (then it fails with the context's error, never sent). It is a
// process cut off from Redis by a partition that drops packets (a call under
// way when the partition heals goes through then, as TCP's retransmission
// would deliver it), or a paused process whose calls go out when it resumes.
type Hook struct {
	mu     sync.Mutex
	before func(ctx context.Context, cmd redis.Cmder) error
	after  func(ctx context.Context, cmd redis.Cmder, err error) error
	held   *hold // non-nil while held
}

// hold is one Hold: done closes when it ends, and err (written before) is
// what the calls it held answer: nil, they go on; else they fail with it.
// calls are the calls it held, in the order they came.
type hold struct {
	done  chan struct{}
	err   error
	calls []Arrival
}

// Arrival is a call's place in a line of calls released in a replayable
// order: when it came, what it sends, and its place in the order of
// arrival. A Hold orders the calls it held by it, and so can a test that
// holds calls of its own (the simulation's stalled saves).
type Arrival struct {
	At    time.Time
	Label string
	Seq   int
}

// Before orders calls by when they came, then (for calls that came at one
// instant, whose order of arrival is the scheduler's choice) by what they
// send, so that a run on virtual time replays the same.
func (c Arrival) Before(o Arrival) bool {
	switch {
	case !c.At.Equal(o.At):
		return c.At.Before(o.At)
	case c.Label != o.Label:
		return c.Label < o.Label
	}
	return c.Seq < o.Seq
}

// rank is c's place among the calls h held (h has ended: no call joins it).
func (h *hold) rank(c Arrival) int {
	n := 0
	for _, o := range h.calls {
		if o.Before(c) {
			n++
		}
	}
	return n
}

var _ redis.Hook = (*Hook)(nil)

// SetBefore installs (or with nil removes) the Before fault.
func (h *Hook) SetBefore(f func(ctx context.Context, cmd redis.Cmder) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = f
}

// SetAfter installs (or with nil removes) the After fault.
func (h *Hook) SetAfter(f func(ctx context.Context, cmd redis.Cmder, err error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after = f
}

// Clear removes every fault (and releases a Hold).
func (h *Hook) Clear() {
	h.SetBefore(nil)
	h.SetAfter(nil)
	h.Release()
}

// Hold makes every command and pipeline from now on wait, unsent, until
// Release or until its own context ends. Holding a held hook changes
// nothing.
func (h *Hook) Hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = &hold{done: make(chan struct{})}
	}
}

// Release lets the calls held by Hold go on, in the order they were held
// (calls held at one instant, whose order is the scheduler's choice, in the
// order of what they send), a microsecond apart (so that on a virtual clock
// they have an order even at one instant, the same in every replay), unless
// their context ended; it stops holding new ones.
// Releasing a hook that is not held changes nothing.
func (h *Hook) Release() { h.endHold(nil) }

// Abort ends a Hold as the death of the process would: the calls held fail
// with ErrInjected, never sent. Aborting a hook that is not held changes
// nothing.
func (h *Hook) Abort() { h.endHold(ErrInjected) }

func (h *Hook) endHold(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held != nil {
		h.held.err = err
		close(h.held.done)
		h.held = nil
	}
}

// Held reports whether the hook holds calls.
func (h *Hook) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != nil
}

// wait blocks while the hook is held: it returns nil once released (at
// once when not held), ErrInjected once aborted, and the context's error if
// ctx ends first. label is what the call sends (it orders calls held at one
// instant).
func (h *Hook) wait(ctx context.Context, label func() string) error {
	h.mu.Lock()
	held := h.held
	var me Arrival
	if held != nil {
		me = Arrival{At: time.Now(), Label: label(), Seq: len(held.calls)}
		held.calls = append(held.calls, me)
	}
	h.mu.Unlock()
	if held == nil {
		return nil
	}
	select {
	case <-held.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if held.err != nil {
		return held.err
	}
	t := time.NewTimer(time.Duration(held.rank(me)+1) * time.Microsecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *Hook) funcs() (before func(context.Context, redis.Cmder) error, after func(context.Context, redis.Cmder, error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.before, h.after
}

// DialHook implements redis.Hook.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *Hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.wait(ctx, func() string { return fmt.Sprint(cmd.Args()...) }); err != nil {
			cmd.SetErr(err)
			return err
		}
		before, after := h.funcs()
		if before != nil {
			if err := before(ctx, cmd); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		err := next(ctx, cmd)
		if after != nil {
			if aerr := after(ctx, cmd, err); aerr != nil {
				cmd.SetErr(aerr)
				return aerr
			}
		}
		return err
	}
}

// ProcessPipelineHook implements redis.Hook: a pipeline waits while the
// hook is held; Before and After act on each of its commands (not on a
// transaction's).
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		label := func() string {
			var b strings.Builder
			for _, c := range cmds {
				fmt.Fprintln(&b, c.Args()...)
			}
			return b.String()
		}
		if err := h.wait(ctx, label); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		before, after := h.funcs()
		if len(cmds) == 0 || cmds[0].Name() == "multi" || before == nil && after == nil {
			return next(ctx, cmds)
		}
		send := cmds
		var err error
		if before != nil {
			send = make([]redis.Cmder, 0, len(cmds))
			for _, c := range cmds {
				if berr := before(ctx, c); berr != nil {
					c.SetErr(berr)
					err = cmp.Or(err, berr)
					continue
				}
				send = append(send, c)
			}
		}
		if len(send) > 0 {
			if perr := next(ctx, send); perr != nil {
				err = cmp.Or(err, perr)
			}
		}
		if after != nil {
			for _, c := range send {
				if aerr := after(ctx, c, c.Err()); aerr != nil {
					c.SetErr(aerr)
					err = cmp.Or(err, aerr)
				}
			}
		}
		return err
	}
}
