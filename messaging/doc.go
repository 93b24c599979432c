// Package messaging is the message bus of the lock handoff: it publishes a
// small message to another game server's subject and delivers the messages
// sent to our own.
//
// Every server listens on one subject, "<prefix>.<jobID>" (prefix
// [DefaultPrefix] unless configured), so a server that finds a profile locked
// by another can ask that server, and only that server, to let go:
//
//	joiner  --Q{D, K, R: joinerJob, L: token}-->  holder's subject
//	holder  --R{D, K}------------------------->  joiner's subject
//
// A [Message] travels as a msgpack map with one-letter keys (see [Encode]).
// [Decode] is written for hostile input: it refuses anything over a size
// limit before decoding, never panics, and sorts every failure into
// [ErrTooLarge], [ErrUnknownType] or [ErrMalformed]. A subscription drops
// such messages, counts them in [Stats] and logs them at Debug; only valid
// messages reach the [Handler]. Whether a message names a known driver, and
// whether its token matches a held lock, is for the handoff layer to judge.
//
// [Bus] is the contract the handoff layer uses; [NATSBus] implements it over
// a *nats.Conn the caller owns (the bus never closes it). A publish that fails
// is retried once after [DefaultRetryDelay], measured on the injected clock.
// Delivery is at most once, as NATS core is: the handoff layer repeats its
// requests and never depends on a single message arriving.
package messaging
