package messaging

import "errors"

// Errors returned by this package. Match them with errors.Is; the returned
// errors wrap them with the reason and the operation.
var (
	// ErrMalformed reports a message that is not a well-formed wire message:
	// bad msgpack, not a map, a field of the wrong type, a duplicate or
	// missing field, a field whose value is not allowed, or bytes after the
	// map.
	ErrMalformed = errors.New("messaging: malformed message")

	// ErrTooLarge reports a message longer than the size limit. It is
	// checked before any decoding.
	ErrTooLarge = errors.New("messaging: message too large")

	// ErrUnknownType reports a message whose type field is not one this
	// version knows.
	ErrUnknownType = errors.New("messaging: unknown message type")

	// ErrInvalidJobID reports a JobID that cannot be a NATS subject token.
	ErrInvalidJobID = errors.New("messaging: invalid job id")

	// ErrInvalidOption reports an option given an invalid value, or options
	// that make no sense together.
	ErrInvalidOption = errors.New("messaging: invalid option")

	// ErrInvalidTrace reports a trace context (traceparent or tracestate)
	// that a message cannot carry.
	ErrInvalidTrace = errors.New("messaging: invalid trace context")

	// ErrUnauthenticated reports a message that a bus with a key refuses: it
	// carries no MAC, a MAC that verifies under none of the bus's keys, or a
	// stamp outside the replay window.
	ErrUnauthenticated = errors.New("messaging: unauthenticated message")
)
