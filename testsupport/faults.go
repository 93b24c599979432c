package testsupport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrInjected is the error a FaultHook answers for an injected failure.
var ErrInjected = errors.New("injected fault")

// FaultHook is a go-redis hook that lets a test fail, stall or lose the
// answer of chosen commands. Add it with client.AddHook. Each func field is
// optional; the zero FaultHook passes everything through.
//
//   - Before runs before a command is sent: a non-nil error fails the
//     command without sending it (the backend is down).
//   - After runs once the command has run, with the error it answered: a
//     non-nil error replaces its answer (the command landed but its answer
//     was lost).
//
// Pipelines are passed through untouched by Before and After.
//
// Hold is the third kind of fault, a call that hangs: while the hook is
// held, every command and pipeline waits, unsent, until Release or until its
// context ends (then it fails with the context's error, never sent). It is a
// process cut off from Redis by a partition that drops packets (a call under
// way when the partition heals goes through then, as TCP's retransmission
// would deliver it), or a paused process whose calls go out when it resumes.
type FaultHook struct {
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

var _ redis.Hook = (*FaultHook)(nil)

// SetBefore installs (or with nil removes) the Before fault.
func (h *FaultHook) SetBefore(f func(ctx context.Context, cmd redis.Cmder) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = f
}

// SetAfter installs (or with nil removes) the After fault.
func (h *FaultHook) SetAfter(f func(ctx context.Context, cmd redis.Cmder, err error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after = f
}

// Clear removes every fault (and releases a Hold).
func (h *FaultHook) Clear() {
	h.SetBefore(nil)
	h.SetAfter(nil)
	h.Release()
}

// Hold makes every command and pipeline from now on wait, unsent, until
// Release or until its own context ends. Holding a held hook changes
// nothing.
func (h *FaultHook) Hold() {
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
func (h *FaultHook) Release() { h.endHold(nil) }

// Abort ends a Hold as the death of the process would: the calls held fail
// with ErrInjected, never sent. Aborting a hook that is not held changes
// nothing.
func (h *FaultHook) Abort() { h.endHold(ErrInjected) }

func (h *FaultHook) endHold(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held != nil {
		h.held.err = err
		close(h.held.done)
		h.held = nil
	}
}

// Held reports whether the hook holds calls.
func (h *FaultHook) Held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held != nil
}

// wait blocks while the hook is held: it returns nil once released (at
// once when not held), ErrInjected once aborted, and the context's error if
// ctx ends first. label is what the call sends (it orders calls held at one
// instant).
func (h *FaultHook) wait(ctx context.Context, label func() string) error {
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

func (h *FaultHook) funcs() (before func(context.Context, redis.Cmder) error, after func(context.Context, redis.Cmder, error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.before, h.after
}

// DialHook implements redis.Hook.
func (h *FaultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *FaultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
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
// hook is held; Before and After leave it alone.
func (h *FaultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
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
		return next(ctx, cmds)
	}
}

// scriptArgs splits an EVAL or EVALSHA command into its keys and arguments;
// ok is false for any other command.
func scriptArgs(cmd redis.Cmder) (keys, argv []any, ok bool) {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	if (name != "evalsha" && name != "eval") || len(args) < 3 {
		return nil, nil, false
	}
	var numKeys int
	if _, err := fmt.Sscan(fmt.Sprint(args[2]), &numKeys); err != nil || numKeys < 0 || 3+numKeys > len(args) {
		return nil, nil, false
	}
	return args[3 : 3+numKeys], args[3+numKeys:], true
}

// ScriptKey returns KEYS[i] (1-based) of an EVAL or EVALSHA command.
func ScriptKey(cmd redis.Cmder, i int) (string, bool) {
	keys, _, ok := scriptArgs(cmd)
	if !ok || i < 1 || i > len(keys) {
		return "", false
	}
	return fmt.Sprint(keys[i-1]), true
}

// CrashHook is a go-redis hook that lets a given number of writes through
// and then fails every command, as if the process had died right after its
// n-th write: a pipeline that crosses the limit runs its first commands and
// loses the rest. Which commands count as writes is up to IsWrite (default:
// every EVAL and EVALSHA, the only way the project writes). The zero value
// lets everything through until CrashAfter arms it.
type CrashHook struct {
	// IsWrite says whether cmd counts; nil counts scripts.
	IsWrite func(cmd redis.Cmder) bool

	mu      sync.Mutex
	armed   bool
	left    int  // writes still allowed while armed
	crashed bool // the limit was reached: everything fails
	writes  int  // writes let through
}

var _ redis.Hook = (*CrashHook)(nil)

// CrashAfter arms the hook: n more writes pass, then everything fails.
func (h *CrashHook) CrashAfter(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.left, h.crashed = true, n, n == 0
}

// Disarm lets everything through again and forgets the crash.
func (h *CrashHook) Disarm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.crashed = false, false
}

// Crashed reports whether the limit was reached.
func (h *CrashHook) Crashed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.crashed
}

// Writes is the number of writes let through since the hook was made.
func (h *CrashHook) Writes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes
}

func (h *CrashHook) isWrite(cmd redis.Cmder) bool {
	if h.IsWrite != nil {
		return h.IsWrite(cmd)
	}
	_, _, ok := scriptArgs(cmd)
	return ok
}

// admit says how many of cmds run: the first n, after which the process is
// dead.
func (h *CrashHook) admit(cmds []redis.Cmder) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.crashed {
		return 0
	}
	for i, c := range cmds {
		if !h.isWrite(c) {
			continue
		}
		if h.armed && h.left == 0 {
			h.crashed = true
			return i
		}
		h.left--
		h.writes++
	}
	if h.armed && h.left == 0 {
		h.crashed = true // the last write allowed landed; nothing after it does
	}
	return len(cmds)
}

// DialHook implements redis.Hook.
func (h *CrashHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *CrashHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.admit([]redis.Cmder{cmd}) == 0 {
			cmd.SetErr(ErrInjected)
			return ErrInjected
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *CrashHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := h.admit(cmds)
		var err error
		if n > 0 {
			err = next(ctx, cmds[:n])
		}
		for _, c := range cmds[n:] {
			c.SetErr(ErrInjected)
			err = ErrInjected
		}
		return err
	}
}
