package main

// The demo's faults: a go-redis hook on one server's client that fails or
// stalls chosen commands, as a dead process or a stuck Redis call would.

import (
	"context"
	"sync"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/scriptcatalog"
	"github.com/ckernel/playerdata/presence"

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

// saveScriptMode returns the mode of a call of the record's save script,
// found by its name; ok is false for any other command.
func saveScriptMode(cmd redis.Cmder) (mode record.WriteMode, ok bool) {
	in, ok := scriptcatalog.Identify(cmd)
	if !ok || in.Name() != record.ScriptSave {
		return "", false
	}
	a, err := record.ParseSaveArgs(in.Args)
	return a.Mode, err == nil
}

// isBeat reports whether cmd is job's presence beat into the hash key.
func isBeat(cmd redis.Cmder, key, job string) bool {
	in, ok := scriptcatalog.Identify(cmd)
	if !ok || in.Name() != presence.ScriptBeat || len(in.Keys) != 1 || in.Keys[0] != key {
		return false
	}
	a, err := presence.ParseBeatArgs(in.Args)
	return err == nil && a.JobID == job
}
