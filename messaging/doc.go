// Package messaging is the message bus of the lock handoff: it publishes a
// small [Message] to another game server's subject, "<prefix>.<jobID>", and
// delivers the messages sent to its own.
//
// [NATSBus] is the [Bus] over NATS core, optionally signing every message
// with a fleet-wide key; a Bus of your own carries the bytes of [Encode] and
// delivers what [Decode] accepts. The wire format and what the key protects
// against are in the docs' bus page (docs/bus.md).
package messaging
