package datadriver

import (
	"log/slog"
	"sync/atomic"
)

// unauthenticatedWarned says whether this process has logged that its
// handoff requests are not authenticated. It is the package's one piece of
// process-wide state, on purpose: the warning is about the deployment, not
// about a Node, and a process that starts several Nodes (a test binary, a
// tool, a server with one Node per shard) would otherwise repeat it for
// each. It is only ever set, never reset.
var unauthenticatedWarned atomic.Bool

// warnUnauthenticated logs, once per process, that handoff requests on the
// subjects under prefix are not authenticated: one line, the reason in one
// sentence.
func warnUnauthenticated(log *slog.Logger, prefix string) {
	if unauthenticatedWarned.Swap(true) {
		return
	}
	log.Warn("handoff requests are not authenticated: set NodeConfig.RequestKey, or any client that can "+
		"publish on "+prefix+".> can end this process's sessions (said once per process)", "subjects", prefix+".>")
}
