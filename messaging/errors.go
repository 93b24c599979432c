package messaging

import "errors"

// Errors returned by this package. Match them with errors.Is; the returned
// errors wrap them with the reason and the operation.
var (
	// ErrMalformed reports a message that is not a well-formed wire message:
	// bad msgpack, not a map, a field of the wrong type, a duplicate or
	// missing field, or bytes after the map.
	ErrMalformed = errors.New("messaging: malformed message")

	// ErrTooLarge reports a message longer than the size limit. It is
	// checked before any decoding.
	ErrTooLarge = errors.New("messaging: message too large")

	// ErrUnknownType reports a message whose type field is not one this
	// version knows.
	ErrUnknownType = errors.New("messaging: unknown message type")

	// ErrInvalidJobID reports a JobID that cannot be a NATS subject token.
	ErrInvalidJobID = errors.New("messaging: invalid job id")

	// ErrInvalidOption reports an option given an invalid value.
	ErrInvalidOption = errors.New("messaging: invalid option")
)
