package messaging

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// defaultReplayWindow is how far a signed message's stamp may be from the
// receiver's clock, either way: well above the clock skew of servers kept in
// time by NTP, the NATS delivery time and the publish retry, and short
// against how fast lock tokens change, so an old request is refused rather
// than judged by its token alone.
const defaultReplayWindow = 30 * time.Second

// MinKeyBytes is the shortest key taken (give 32 random bytes).
const MinKeyBytes = 16

// macDomain opens every MAC input, so that a MAC made for a handoff message
// can never pass for one made with the same key for anything else. A later
// wire version that covers more fields changes it.
const macDomain = "playerdata/handoff/v1"

// unauthenticatedWarnEvery spaces the Warn lines of dropped unauthenticated
// messages: one a minute says a key or a clock is wrong; the rest go to
// Debug, so a flood costs no log volume.
const unauthenticatedWarnEvery = time.Minute

// withKey turns request authentication on: every message the bus publishes
// carries a stamp (its clock, Unix milliseconds) and an HMAC-SHA256 under
// key, and every message it receives must carry a MAC that verifies under
// key (or a withAcceptedKeys key) with a stamp within the replay window of
// its clock; any other is dropped and counted in Stats.DroppedUnauthenticated.
// A signed message is delivered once: received again within the window, it
// is dropped and counted in Stats.DroppedReplayed (the bus remembers a
// bounded number of them: see the package documentation). A published
// message must then name its Sender. The key is copied. It must
// be at least MinKeyBytes long, else the option fails with ErrInvalidConfig.
// Default: no key; messages go unsigned and any MAC received is ignored.
//
// The key is a secret shared by the whole fleet: it proves that a message
// comes from a server holding it, not which one (see the package
// documentation for what it protects against, and for a safe rollout).
func withKey(key []byte) option {
	return func(o *options) error {
		if len(key) < MinKeyBytes {
			return fmt.Errorf("%w: key of %d bytes, want at least %d", ErrInvalidConfig, len(key), MinKeyBytes)
		}
		o.key = slices.Clone(key)
		return nil
	}
}

// withAcceptedKeys names more keys a received MAC may verify under, besides
// the withKey key, which alone signs: the previous and the next key during a
// key rotation. Each must be at least MinKeyBytes long, else the option
// fails with ErrInvalidConfig; without withKey, NewNATSBus fails with
// ErrInvalidConfig. The keys are copied. Default: none.
func withAcceptedKeys(keys ...[]byte) option {
	return func(o *options) error {
		for i, k := range keys {
			if len(k) < MinKeyBytes {
				return fmt.Errorf("%w: accepted key %d of %d bytes, want at least %d", ErrInvalidConfig, i, len(k), MinKeyBytes)
			}
			o.acceptedKeys = append(o.acceptedKeys, slices.Clone(k))
		}
		return nil
	}
}

// withAcceptUnauthenticated makes a bus with a key also deliver messages
// that carry no MAC at all (those of servers without the key), while it still
// signs what it sends and drops a message whose MAC does not verify or whose
// stamp is outside the window. It is the first step of turning
// authentication on across a running fleet; it protects nothing, since a
// forger sends no MAC. Without withKey, NewNATSBus fails with
// ErrInvalidConfig. Default: off (a message without a MAC is dropped).
func withAcceptUnauthenticated() option {
	return func(o *options) error {
		o.acceptUnauthenticated = true
		return nil
	}
}

// withReplayWindow sets how far a received stamp may be from the bus clock,
// in the past or the future (clock skew goes both ways); default
// defaultReplayWindow. d must be positive, else the option fails with
// ErrInvalidConfig; without withKey, NewNATSBus fails with ErrInvalidConfig.
func withReplayWindow(d time.Duration) option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: replay window %v, must be positive", ErrInvalidConfig, d)
		}
		o.replayWindow = d
		o.replayWindowSet = true
		return nil
	}
}

// checkAuthOptions refuses authentication options given without a key.
func (o *options) checkAuthOptions() error {
	if o.key != nil {
		return nil
	}
	switch {
	case len(o.acceptedKeys) > 0:
		return fmt.Errorf("%w: withAcceptedKeys without withKey", ErrInvalidConfig)
	case o.acceptUnauthenticated:
		return fmt.Errorf("%w: withAcceptUnauthenticated without withKey", ErrInvalidConfig)
	case o.replayWindowSet:
		return fmt.Errorf("%w: withReplayWindow without withKey", ErrInvalidConfig)
	}
	return nil
}

// appendMACInput appends to dst the bytes a MAC covers: twelve items in a
// fixed order, each written as its length (4 bytes, big-endian) and then its
// bytes, whether it is set or not:
//
//	"playerdata/handoff/v1" (the domain), subject prefix, destination
//	JobID, stamp (8 bytes, big-endian two's complement), T, D, K, R, L, S,
//	P, A
//
// and a thirteenth item when the message has one of these (a message has at
// most one: Purpose is a request's, Body a move's): U, a request's Purpose
// (a restore's or a wipe's), or Y, a move's body (TypeMove). A message
// with neither is covered exactly as before they existed, so servers of
// both builds verify each other's; a request with a Purpose (a restore's)
// does not verify on an older build, which drops it as unauthenticated: a
// restore whose holder runs an older build with a key waits until that
// server is upgraded (or its lock moves).
//
// Every item has its own slot and its own length, so no bytes can move from
// one item to another, an unset item cannot stand for another one, and two
// different (prefix, destination, message) triples never share an input;
// the tests parse the input back to prove it. The input is built from the
// decoded message, not from the wire bytes, so how a sender's msgpack
// happened to order or size the fields does not matter.
func appendMACInput(dst []byte, prefix, to string, m Message) []byte {
	var stamp [8]byte
	binary.BigEndian.PutUint64(stamp[:], uint64(m.Stamp))
	for _, item := range [...]string{
		macDomain, prefix, to, string(stamp[:]),
		string(m.Type), m.Driver, m.Key, m.Requester, m.Token, m.Sender, m.TraceParent, m.TraceState,
	} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(item)))
		dst = append(dst, item...)
	}
	if m.Purpose != "" {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Purpose)))
		dst = append(dst, m.Purpose...)
	}
	if m.Type == TypeMove {
		// A move's body, as a thirteenth item: the type (covered above) says
		// it is there, so no other message's input changes.
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
	}
	return dst
}

// computeMAC returns the HMAC-SHA256 under key of m (its MAC aside) sent to
// server to under subject prefix prefix.
func computeMAC(key []byte, prefix, to string, m Message) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(appendMACInput(make([]byte, 0, 256), prefix, to, m))
	return h.Sum(nil)
}

// sign returns m stamped with now and carrying its MAC under key.
func sign(key []byte, prefix, to string, m Message, now time.Time) Message {
	m.Stamp = now.UnixMilli()
	m.MAC = string(computeMAC(key, prefix, to, m))
	return m
}

// verify checks the MAC of m, received on the subject of server to, against
// keys, then its stamp against now and window. It fails with
// errUnauthenticated when m carries no MAC, when the MAC verifies under none
// of keys (each compared in constant time), or when the stamp is more than
// window away from now.
func verify(keys [][]byte, prefix, to string, m Message, now time.Time, window time.Duration) error {
	if m.MAC == "" {
		return fmt.Errorf("%w: no MAC", errUnauthenticated)
	}
	input := appendMACInput(make([]byte, 0, 256), prefix, to, m)
	ok := false
	for _, k := range keys {
		h := hmac.New(sha256.New, k)
		h.Write(input)
		if hmac.Equal(h.Sum(nil), []byte(m.MAC)) {
			ok = true
			break
		}
	}
	if !ok {
		return fmt.Errorf("%w: MAC from %q verifies under no key", errUnauthenticated, m.Sender)
	}
	// Sub saturates, so a stamp far off either way cannot wrap around.
	if skew := now.Sub(time.UnixMilli(m.Stamp)); skew > window || skew < -window {
		return fmt.Errorf("%w: stamp of %q is %v off the receiver's clock, replay window ±%v", errUnauthenticated, m.Sender, skew, window)
	}
	return nil
}
