package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// osProc is one server process (redis-server, nats-server) spawned for a
// test of a multi-process topology. The goroutine started with it is its
// only reaper: it waits for the process and closes done, so a process is
// never left a zombie and nobody else calls cmd.Wait.
type osProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// startOSProc starts binary with args in dir, its stdout and stderr appended
// to logPath after a line naming the start. The process dies with the test
// binary (on Linux) and must be ended with kill.
func startOSProc(binary, dir, logPath string, args ...string) (*osProc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "--- testsupport: %s starting %s %q\n", time.Now().Format(time.RFC3339Nano), binary, args)
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &osProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *osProc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited (and been reaped).
func (p *osProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (which also ends a stopped process) and waits until the
// process is reaped.
func (p *osProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// pause stops the process (SIGSTOP): it keeps its sockets open but answers
// nothing until resume.
func (p *osProc) pause() error { return pauseProcess(p.cmd.Process) }

// resume continues a paused process (SIGCONT).
func (p *osProc) resume() error { return resumeProcess(p.cmd.Process) }
