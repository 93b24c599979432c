//go:build linux

package testsupport

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel SIGKILL the child when the thread that
// started it exits, so an interrupted `go test` does not leak servers.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
