//go:build !unix

package testsupport

import (
	"errors"
	"os"
)

// errNoPause is why a process cannot be paused on this system.
var errNoPause = errors.New("pausing a process needs SIGSTOP (unix only)")

// pauseProcess cannot pause a process here.
func pauseProcess(*os.Process) error { return errNoPause }

// resumeProcess cannot resume a process here.
func resumeProcess(*os.Process) error { return errNoPause }
