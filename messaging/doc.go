// Package messaging is the message bus of the lock handoff: it publishes a
// small message to another game server's subject and delivers the messages
// sent to our own.
//
// Every server listens on one subject, "<prefix>.<jobID>" (prefix
// [DefaultPrefix] unless configured), so a server that finds a profile locked
// by another can ask that server, and only that server, to let go:
//
//	joiner  --Q{D, K, R: joinerJob, L: token, S: joinerJob}-->  holder's subject
//	holder  --R{D, K, S: holderJob}------------------------->  joiner's subject
//	anyone  --M{D, K, S: senderJob}------------------------->  holder's subject ("pull the inbox of K")
//	source  --V{D, K, S: sourceJob, Y: body}---------------->  target's subject (a move's step; Y is the datadriver's)
//
// A [Message] travels as a msgpack map with one-letter keys (see [Encode]).
// [Decode] is written for hostile input: it refuses anything over a size
// limit before decoding, never panics, and sorts every failure into
// [ErrTooLarge], [ErrUnknownType] or [ErrMalformed]. A subscription drops
// such messages, counts them in [Stats] and logs them at Debug; only valid
// messages reach the [Handler]. Whether a message names a known driver, and
// whether its token matches a held lock, is for the handoff layer to judge.
//
// # Compatibility
//
// A decoder skips the keys it does not know, whatever their msgpack type,
// and reads nil as absent, so fields can be added: a message from an older
// build (T, D, K, R, L only) decodes here, and an older build reads the
// request or reply in a message from this one and skips S, P, A, U, W and H
// (both are tested, the second against a frozen copy of the first wire
// version's decoder). A type a build does not know, like [TypeNotify] for
// an older one, is dropped and counted as [ErrUnknownType] there. A message
// with none of the new fields encodes to the bytes an older build wrote.
//
// # Trace context
//
// A message may carry a W3C traceparent (P) and tracestate (A), checked by
// [ValidTraceParent] and [ValidTraceState] and covered by the MAC, so a
// holder's release can join the trace of the joiner that asked for it. The
// package only carries the strings; it does not depend on OpenTelemetry.
//
// # Request authentication
//
// Off by default. With [WithKey], a [NATSBus] signs every message it
// publishes: it sets the stamp W (its clock, Unix milliseconds) and the MAC H,
// an HMAC-SHA256 under the key of these twelve items, each written as a
// 4-byte big-endian length followed by its bytes, whether it is set or not:
//
//	"playerdata/handoff/v1", subject prefix, destination JobID,
//	stamp (8 bytes, big-endian), T, D, K, R, L, S, P, A
//
// and, only for a request with a Purpose (U, a restore's), a thirteenth:
// U. Because every item has its own slot and length, no two different
// messages (or destinations) share an input: bytes cannot move between
// fields, an unset field cannot stand for another, and twelve items cannot
// pass for thirteen. The input is built from the decoded fields, not the
// wire bytes. A message without a Purpose is covered exactly as by builds
// that predate it, so both verify each other's; a request with one does not
// verify on such a build, which drops it (a restore then waits for the
// holder's upgrade). Another field added to the wire later is not covered
// unless it is added so, or the domain string changes with it (v2), which
// receivers must learn before senders use it.
//
// A receiving bus with a key delivers a message only if its MAC verifies
// (constant-time comparison) under its key or one of [WithAcceptedKeys] for
// its own JobID and prefix, and its stamp is within the replay window of
// its own clock ([DefaultReplayWindow], ±30 s, [WithReplayWindow]); any other
// message is dropped, counted in Stats.DroppedUnauthenticated, and logged
// (at Warn at most once a minute, else at Debug). A signed message must name
// its Sender (S), and a request's Sender must be its Requester. A bus
// without a key ignores a MAC it cannot check and clears it, so a Handler
// sees a MAC only on a message its bus verified.
//
// What it protects against: anyone who can publish on the NATS subjects but
// does not hold the key (another application or environment on the same
// NATS, a leaked client credential) can no longer make a server end a
// session, wake a waiting join, or trigger an inbox pull; a message cannot
// be redirected to another server, namespace prefix or changed in any field;
// a signed message is delivered once: the bus remembers the MAC of each one
// it delivered while its stamp is within the window, and drops the same
// message received again (a replay of a captured one), counted in
// Stats.DroppedReplayed; once the window has passed, its stamp refuses it.
// A bus's stamps to one destination strictly increase (running at most a
// second ahead of its clock), so two messages of the same content sent
// within a millisecond are two messages with two MACs.
//
// What it does not: the key is shared by the fleet, so it proves that a
// server of the fleet sent the message, not which one (S is claimed, not
// proven); messages are not encrypted (use NATS TLS: lock tokens and player
// keys travel in the clear otherwise); the replay memory is bounded (65,536
// messages, about 2,000 signed messages a second received for the default
// window), and past it the oldest are forgotten first
// (Stats.ReplayCacheEvicted), so under more genuine traffic than that a
// captured message can be delivered again within the window, which the
// handoff tolerates (a request is obeyed only while its token names the
// current lock, a reply only wakes a waiter to check the record, a notify
// only pulls an inbox, which applies each message once); a message can
// still be dropped or delayed (the handoff repeats its requests and falls
// back to presence); and servers whose clocks differ by more than the
// window do not hear each other.
//
// A safe rollout across a running fleet, each step a full rolling deploy:
//
//  1. Every server gets the key with [WithAcceptUnauthenticated]: it signs,
//     drops a bad MAC, and still hears servers that have no key yet (which
//     ignore the MAC they receive).
//  2. Every server drops [WithAcceptUnauthenticated]: the key is required.
//     A server of step 1 and one of step 2 hear each other, since both sign.
//
// Requiring the key at once would make a server deaf to the requests of
// servers not yet signing: their joins of its players would wait LockWait
// and fail. Turning it off is the same two steps backwards. A key rotation
// is three: sign with the old key accepting the new ([WithAcceptedKeys]),
// then sign with the new key accepting the old, then the new key alone.
//
// # The bus
//
// [Bus] is the contract the handoff layer uses; [NATSBus] implements it over
// a *nats.Conn the caller owns (the bus never closes it). A publish that fails
// is retried once after [DefaultRetryDelay], measured on the injected clock.
// Delivery is at most once, as NATS core is: the handoff layer repeats its
// requests and never depends on a single message arriving. The bus chains
// its own handlers in front of the connection's disconnect, reconnect and
// closed handlers, to count those events in [Stats] and log them (see
// [NewNATSBus]).
package messaging
