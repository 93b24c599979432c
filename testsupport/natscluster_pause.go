package testsupport

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Pause stops node i with SIGSTOP, as a hung host or a long GC pause would:
// its sockets stay open, so its clients and its route peers notice nothing,
// but it reads, forwards and delivers nothing. What is sent to it meanwhile
// waits in the kernel's socket buffers and is handled on Resume, or lost
// with the process on Kill (which ends a paused node too). A signal is
// delivered asynchronously: where /proc is available (Linux) Pause returns
// once every thread of the process has stopped, so nothing sent after it
// returns is handled before Resume. Pausing a paused or killed node does
// nothing.
func (c *NATSCluster) Pause(tb testing.TB, i int) {
	tb.Helper()
	c.signal(tb, i, "pause", func(p *osProc) error {
		if err := p.pause(); err != nil {
			return err
		}
		return waitStopped(p.pid(), natsClusterReadyWithin)
	})
}

// Resume continues node i after Pause (SIGCONT); it then handles what
// arrived while it was stopped. Resuming a running or killed node does
// nothing.
func (c *NATSCluster) Resume(tb testing.TB, i int) {
	tb.Helper()
	c.signal(tb, i, "resume", (*osProc).resume)
}

// signal applies f to node i's process, if it runs.
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

// waitStopped polls /proc until every thread of process pid is stopped
// (state T or t), and returns nil at once where /proc cannot tell.
func waitStopped(pid int, within time.Duration) error {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	deadline := time.Now().Add(within)
	for {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return nil // no /proc: the best we can do is the signal
		}
		running := ""
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			// "tid (comm) S ...": the state follows the last ")".
			if j := bytes.LastIndexByte(stat, ')'); j >= 0 && j+2 < len(stat) {
				if s := stat[j+2]; s != 'T' && s != 't' {
					running = fmt.Sprintf("thread %s in state %c", task.Name(), s)
					break
				}
			}
		}
		if running == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped within %v: %s", pid, within, running)
		}
		time.Sleep(time.Millisecond)
	}
}
