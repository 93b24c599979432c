package handoffcore

import "errors"

var (
	// ErrDeadline: a Wait reached its deadline; the holder neither released
	// the lock nor was proven stopped.
	ErrDeadline = errors.New("handoff wait deadline")
	// ErrDuplicateDriver: a driver of that name is already registered.
	ErrDuplicateDriver = errors.New("handoff: duplicate driver name")
	// ErrInvalidConfig: a Config field is missing or invalid.
	ErrInvalidConfig = errors.New("handoff: invalid config")
)
