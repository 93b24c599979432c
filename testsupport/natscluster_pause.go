package testsupport

import "testing"

// Pause stops node i with SIGSTOP, as a hung host or a long GC pause would:
// its sockets stay open, so its clients and its route peers notice nothing,
// but it reads, forwards and delivers nothing. What is sent to it meanwhile
// waits in the kernel's socket buffers and is handled on Resume, or lost
// with the process on Kill (which ends a paused node too). Pausing a paused
// or killed node does nothing.
func (c *NATSCluster) Pause(tb testing.TB, i int) {
	tb.Helper()
	c.signal(tb, i, "pause", (*osProc).pause)
}

// Resume continues node i after Pause (SIGCONT); it then handles what
// arrived while it was stopped. Resuming a running or killed node does
// nothing.
func (c *NATSCluster) Resume(tb testing.TB, i int) {
	tb.Helper()
	c.signal(tb, i, "resume", (*osProc).resume)
}

// signal applies pause or resume to node i's process, if it runs.
func (c *NATSCluster) signal(tb testing.TB, i int, what string, f func(*osProc) error) {
	tb.Helper()
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc == nil {
		return
	}
	if err := f(nd.proc); err != nil {
		tb.Fatalf("testsupport: %s NATS node %d: %v", what, i, err)
	}
}
