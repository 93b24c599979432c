//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used, and
// whether it is known.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// raisePriority gives process pid a nice value of -10 (it needs the
// privilege to: else an error, and the process runs as it was).
func raisePriority(pid int) error { return syscall.Setpriority(syscall.PRIO_PROCESS, pid, -10) }
