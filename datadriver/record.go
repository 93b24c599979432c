package datadriver

import (
	"fmt"

	"github.com/ckernel/playerdata/internal/names"
)

// validKey refuses a key no profile can have (names.Key) with ErrInvalidKey.
func validKey(key string) error {
	if err := names.Key(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}

// validName refuses a driver Name (names.Driver) with ErrInvalidConfig.
func validName(name string) error {
	if err := names.Driver(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
