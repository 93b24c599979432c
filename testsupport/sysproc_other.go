//go:build !linux

package testsupport

import "os/exec"

// dieWithParent does nothing here: only Linux offers a parent-death signal,
// so elsewhere tb.Cleanup alone stops the child.
func dieWithParent(cmd *exec.Cmd) {}
