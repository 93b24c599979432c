package main

import (
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/names"
)

// Exit statuses of the program.
const (
	// exitOK: the command did what was asked, or found nothing to do.
	exitOK = 0
	// exitFailed: the command failed, or refused (unlock of a live holder's lock).
	exitFailed = 1
	// exitUsage: the command line is wrong: an unknown command or flag, a
	// missing argument, or a namespace that holds nothing at all.
	exitUsage = 2
)

// usageError is a mistake in the command line: main exits with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// checkProfile refuses, as a usage error of command, a driver name or a
// profile key no server could have; an empty driver is not checked (a
// command for which --driver is optional).
func checkProfile(command, driver, key string) error {
	if driver != "" {
		if err := names.Driver(driver); err != nil {
			return usagef("%s: invalid driver name: %w", command, err)
		}
	}
	if err := names.Key(key); err != nil {
		return usagef("%s: invalid profile key: %w", command, err)
	}
	return nil
}

// exitStatus maps run's error to the process's exit status.
func exitStatus(err error) int {
	var (
		u *usageError
		c *childExit
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &c):
		return c.code
	case errors.As(err, &u):
		return exitUsage
	default:
		return exitFailed
	}
}
