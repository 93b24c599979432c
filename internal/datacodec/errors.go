package datacodec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ckernel/playerdata/internal/msgpackwire"
)

// Errors returned by this package. Test them with errors.Is; a decoding
// error comes as a *FieldError naming where it happened, and a migration's
// as a *MigrationError (a panic inside it as a *PanicError).
var (
	// ErrInvalidOptions: New was given options it cannot work with (an
	// unknown tag name, a migration without Apply), or T has a field the
	// codec cannot encode (a chan, a func, a complex number).
	ErrInvalidOptions = errors.New("datacodec: invalid options")

	// ErrInvalidVersion: Decode was asked for a negative schema version.
	ErrInvalidVersion = errors.New("datacodec: invalid schema version")

	// ErrMalformed: the stored bytes are not msgpack: truncated, an invalid
	// code, a length the input cannot hold, or bytes after the value.
	ErrMalformed = errors.New("datacodec: malformed msgpack")

	// ErrTypeMismatch: a stored value does not fit the field of T it
	// belongs to (a string where T has an int, a number that overflows the
	// field). A type changed incompatibly is a migration's job.
	ErrTypeMismatch = errors.New("datacodec: stored value does not fit the type")

	// ErrUnknownMismatch: Encode was given an *Unknown that Decode of
	// another Codec returned.
	ErrUnknownMismatch = errors.New("datacodec: unknown fields of another codec")

	// ErrNotATree: Encode or Clone met a value nested deeper than 1000
	// levels: a pointer, map or interface that holds itself.
	ErrNotATree = errors.New("datacodec: value nested too deep (a cycle?)")

	// ErrNilValue: Encode or Clone was given a nil *T.
	ErrNilValue = errors.New("datacodec: nil *T")
)

var (
	errTruncated = fmt.Errorf("%w: unexpected end of input", ErrMalformed)
	errTooDeep   = fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxDepth)
)

func mismatch(c byte, want string) error {
	return fmt.Errorf("%w: msgpack %s into %s", ErrTypeMismatch, msgpackwire.Describe(c), want)
}

// fromWire turns an error of the msgpack reader into this package's:
// ErrMalformed for bytes that are not msgpack, ErrTypeMismatch for
// msgpack of another type.
func fromWire(err error) error {
	switch e := err.(type) {
	case *msgpackwire.TypeError:
		return mismatch(e.Code, e.Want)
	case *msgpackwire.CodeError:
		return fmt.Errorf("%w: %w", ErrMalformed, e)
	}
	if err == msgpackwire.ErrTruncated {
		return errTruncated
	}
	return err
}

// FieldError is a decoding error and where it happened. Path names the
// value by its stored (msgpack) names, as a migration sees them:
// "Settings.Volume", `Inventory["sword"].Level`, "Quests[3]"; it is empty
// for the top level. Err matches ErrMalformed or ErrTypeMismatch, or is an
// error of a type's own msgpack decoder.
type FieldError struct {
	Path string
	Err  error
}

// Error names the path and the cause.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return "datacodec: decode: " + e.Err.Error()
	}
	return "datacodec: decode " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// pathError collects path segments, innermost first, while a decoding
// error unwinds; fieldError turns it into a *FieldError at the top.
type pathError struct {
	segs []string // innermost first
	err  error
}

func (e *pathError) Error() string { return e.err.Error() }

// atPath prepends seg (".Name", `["key"]`, "[3]") to err's path.
func atPath(err error, seg string) error {
	if pe, ok := err.(*pathError); ok {
		pe.segs = append(pe.segs, seg)
		return pe
	}
	return &pathError{segs: []string{seg}, err: err}
}

func fieldError(err error) error {
	pe, ok := err.(*pathError)
	if !ok {
		return &FieldError{Err: fromWire(err)}
	}
	pe.err = fromWire(pe.err)
	var b strings.Builder
	for i := len(pe.segs) - 1; i >= 0; i-- {
		b.WriteString(pe.segs[i])
	}
	return &FieldError{Path: strings.TrimPrefix(b.String(), "."), Err: pe.err}
}

// MigrationError is an error (or a recovered panic, as a *PanicError) of
// the migration at Index, which upgrades data from schema version Index to
// Index+1.
type MigrationError struct {
	Index int
	Err   error
}

// Error names the migration and its error.
func (e *MigrationError) Error() string {
	return fmt.Sprintf("datacodec: migration %d (to version %d): %v", e.Index, e.Index+1, e.Err)
}

// Unwrap returns Err.
func (e *MigrationError) Unwrap() error { return e.Err }

// PanicError is a panic recovered from a migration's Apply: the value it
// panicked with and the goroutine's stack at the panic.
type PanicError struct {
	Value any
	Stack []byte
}

// Error gives the panic's value and the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
}
