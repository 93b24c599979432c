package datadriver

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/ckernel/playerdata/internal/record"
)

// MaxKeyBytes bounds a profile key: it travels in every handoff message,
// whose size is limited.
const MaxKeyBytes = 512

// RecordKey is the Redis hash of one profile: "<namespace>:{<driver>:<key>}"
// ("{<driver>:<key>}" without a namespace). Everything kept for a profile
// lives under it or shares its hash tag, so it stays in one Redis Cluster
// slot. Operator tools use it to read a record.
func RecordKey(ns, driver, key string) string { return record.Key(ns, driver, key) }

// ValidKey reports whether key can name a profile: an error wrapping
// ErrInvalidKey when it is empty, longer than MaxKeyBytes, not UTF-8 or has
// control characters.
func ValidKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidKey, r)
		}
	}
	return nil
}
