// Package names checks profile keys and driver names, for datadriver (which
// wraps a refusal in ErrInvalidKey or ErrInvalidConfig) and the CLI (which
// checks its arguments before it connects).
package names

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/ckernel/playerdata/internal/defaults"
)

// Key says why key cannot name a profile (nil when it can): it is empty,
// longer than defaults.MaxKeyBytes, not UTF-8 or has control characters.
func Key(key string) error {
	switch {
	case key == "":
		return errors.New("the key is empty")
	case len(key) > defaults.MaxKeyBytes:
		return fmt.Errorf("%d bytes, more than %d", len(key), defaults.MaxKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("not valid UTF-8")
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// Driver says why name cannot name a driver (nil when it can): it appears
// in Redis keys and NATS subjects, so it is 1 to defaults.MaxNameBytes ASCII
// letters, digits, '_' and '-'.
func Driver(name string) error {
	switch {
	case name == "":
		return errors.New("the Name is required")
	case len(name) > defaults.MaxNameBytes:
		return fmt.Errorf("the Name is %d bytes, more than %d", len(name), defaults.MaxNameBytes)
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("the Name %q has %s at byte %d: a Name is letters, digits, '_' and '-'", name, describeRune(r), i)
		}
	}
	return nil
}

// describeRune names a character a Name may not have.
func describeRune(r rune) string {
	switch {
	case r == ' ':
		return "a space"
	case r == '.':
		return "a dot"
	case r == '{' || r == '}':
		return fmt.Sprintf("a brace (%q)", r)
	case r == '*' || r == '>':
		return fmt.Sprintf("a NATS wildcard (%q)", r)
	case r == utf8.RuneError:
		return "invalid UTF-8"
	}
	return fmt.Sprintf("%q", r)
}
