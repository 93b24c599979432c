//go:build unix

package testsupport

import (
	"os"
	"syscall"
)

// pauseProcess sends SIGSTOP.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess sends SIGCONT.
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
