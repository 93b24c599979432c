//go:build !unix

package bench

import "time"

// processCPU is not known on this system.
func processCPU() (time.Duration, bool) { return 0, false }

// raisePriority does nothing here.
func raisePriority(int) error { return nil }
