package main

// The demo's faults: a go-redis hook on one server's client that fails or
// stalls chosen commands, as a dead process or a stuck Redis call would.

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// faultHook is a go-redis hook whose fault can be changed while the client
// runs. The zero faultHook passes everything through; pipelines always pass.
type faultHook struct {
	// observe, when set at creation, sees every command the fault lets
	// through.
	observe func(cmd redis.Cmder)

	mu     sync.Mutex
	before func(ctx context.Context, cmd redis.Cmder) error // nil: pass
}

var _ redis.Hook = (*faultHook)(nil)

// set installs f (nil removes the fault): it runs before every command, and
// a non-nil error fails the command without sending it.
func (h *faultHook) set(f func(ctx context.Context, cmd redis.Cmder) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before = f
}

func (h *faultHook) get() func(ctx context.Context, cmd redis.Cmder) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.before
}

// DialHook implements redis.Hook.
func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f := h.get(); f != nil {
			if err := f(ctx, cmd); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		if h.observe != nil {
			h.observe(cmd)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// saveScriptMode returns the mode ("save", "release" or "settle") of a call
// of the library's save.lua, recognised by its shape: EVAL or EVALSHA with
// one key and twelve arguments, the first being the mode. ok is false for
// any other command. (The library exports no way to recognise its scripts;
// this mirrors what its own tests do.)
func saveScriptMode(cmd redis.Cmder) (mode string, ok bool) {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	if (name != "evalsha" && name != "eval") || len(args) != 3+1+12 {
		return "", false
	}
	if fmt.Sprint(args[2]) != "1" {
		return "", false
	}
	switch mode = fmt.Sprint(args[4]); mode {
	case "save", "release", "settle":
		return mode, true
	}
	return "", false
}
