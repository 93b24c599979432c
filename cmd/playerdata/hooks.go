package main

// The demo's faults: a go-redis hook on one server's client that fails or
// stalls chosen commands, as a dead process or a stuck Redis call would.

import (
	"context"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/redisfault"
	"github.com/ckernel/playerdata/internal/scriptcatalog"
	"github.com/redis/go-redis/v9"
)

// faultHook is one demo server's fault: the project's fault hook
// (internal/redisfault) whose Before, changed with set while the client
// runs, is the case's fault, and then shows observe every command the
// fault lets through. Pipelines always pass.
type faultHook struct {
	redisfault.Hook
	observe func(cmd redis.Cmder)
}

// newFaultHook returns a hook without a fault whose commands observe sees.
func newFaultHook(observe func(cmd redis.Cmder)) *faultHook {
	h := &faultHook{observe: observe}
	h.set(nil)
	return h
}

// set installs f (nil removes the fault): it runs before every command, and
// a non-nil error fails the command without sending it.
func (h *faultHook) set(f func(ctx context.Context, cmd redis.Cmder) error) {
	h.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if f != nil {
			if err := f(ctx, cmd); err != nil {
				return err
			}
		}
		h.observe(cmd)
		return nil
	})
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
	if !ok || in.Name() != presencescript.NameBeat || len(in.Keys) != 1 || in.Keys[0] != key {
		return false
	}
	a, err := presencescript.ParseBeatArgs(in.Args)
	return err == nil && a.JobID == job
}
