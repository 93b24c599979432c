package messaging

import "errors"

// Errors of this package, wrapped with the reason: match them with errors.Is.
var (
	// ErrMalformed: not a message the protocol allows (see Encode).
	ErrMalformed = errors.New("messaging: malformed message")
	// ErrTooLarge: over the size limit, refused before any decoding.
	ErrTooLarge = errors.New("messaging: message too large")
	// ErrUnknownType: a message type this version does not know.
	ErrUnknownType = errors.New("messaging: unknown message type")
	// errInvalidJobID reports a JobID that cannot be a NATS subject token.
	errInvalidJobID = errors.New("messaging: invalid job id")

	// ErrInvalidConfig: a NATSConfig NewNATSBus refuses.
	ErrInvalidConfig = errors.New("messaging: invalid config")

	// errInvalidTrace reports a trace context (traceparent or tracestate)
	// that a message cannot carry.
	errInvalidTrace = errors.New("messaging: invalid trace context")

	// errUnauthenticated reports a message that a bus with a key refuses: it
	// carries no MAC, a MAC that verifies under none of the bus's keys, or a
	// stamp outside the replay window.
	errUnauthenticated = errors.New("messaging: unauthenticated message")
)
