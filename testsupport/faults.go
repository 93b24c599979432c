package testsupport

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ckernel/playerdata/internal/redisfault"
	"github.com/redis/go-redis/v9"
)

// ErrInjected is the error a FaultHook or a CrashHook answers for an
// injected failure.
var ErrInjected = redisfault.ErrInjected

// FaultHook is a go-redis hook that lets a test fail, stall or lose the
// answer of chosen commands: see redisfault.Hook, which the program's demo
// shares. Add it with client.AddHook; the zero FaultHook passes everything
// through.
type FaultHook = redisfault.Hook

// Arrival is a call's place in a line of calls released in a replayable
// order: see redisfault.Arrival.
type Arrival = redisfault.Arrival

// FailScriptsWhile returns a FaultHook that fails every script call (EVAL,
// EVALSHA) with ErrInjected while failing is set, and passes everything
// else: added to a Node's presence client, its beats go unacknowledged
// (the Node fenced) until the test clears the flag.
func FailScriptsWhile(failing *atomic.Bool) *FaultHook {
	h := &FaultHook{}
	h.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if _, _, script := scriptArgs(cmd); failing.Load() && script {
			return ErrInjected
		}
		return nil
	})
	return h
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

// BeforeScriptHook is a go-redis hook that runs Do once, just before the
// first script call (EVAL or EVALSHA) whose KEYS[1] is Key: what another
// process does between a caller's read and its write.
type BeforeScriptHook struct {
	Key  string
	Do   func(ctx context.Context)
	once sync.Once
}

var _ redis.Hook = (*BeforeScriptHook)(nil)

// DialHook lets every dial through.
func (h *BeforeScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook lets every pipeline through.
func (h *BeforeScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook runs Do before the first script call on Key.
func (h *BeforeScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k, ok := ScriptKey(cmd, 1); ok && k == h.Key {
			h.once.Do(func() { h.Do(ctx) })
		}
		return next(ctx, cmd)
	}
}
