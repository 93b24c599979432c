// Package jobid is the one rule for a server's JobID, which presence beats
// under, lock records name and the bus uses as a subject token: messaging,
// presence and datadriver all check a JobID with it, each wrapping the
// reason in its own ErrInvalidJobID.
package jobid

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest JobID (and subject prefix token) accepted: a real
// one is a host or pod name, and the bound keeps wire messages small.
const MaxBytes = 128

// Problem returns why s cannot be a JobID, or "" when it can. A JobID is
// one token of a NATS subject: non-empty, at most MaxBytes bytes, valid
// UTF-8, and free of whitespace, control characters (so of the NUL byte
// that begins presence's meta fields), '.', '*' and '>'.
func Problem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxBytes:
		return fmt.Sprintf("%d bytes, limit %d", len(s), MaxBytes)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		switch {
		case r == '.' || r == '*' || r == '>':
			return fmt.Sprintf("%q contains %q", s, r)
		case unicode.IsSpace(r):
			return fmt.Sprintf("%q contains whitespace %U", s, r)
		case unicode.IsControl(r):
			return fmt.Sprintf("%q contains control character %U", s, r)
		}
	}
	return ""
}

// ErrInvalid is wrapped by Check's error.
var ErrInvalid = errors.New("invalid JobID")

// Check returns nil when s can be a JobID, else an error wrapping
// ErrInvalid that says why.
func Check(s string) error {
	if p := Problem(s); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, p)
	}
	return nil
}
