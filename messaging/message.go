package messaging

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ckernel/playerdata/internal/jobid"
	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Type is a message type on the wire.
type Type string

// The message types of the handoff protocol.
const (
	TypeRequest Type = "Q" // release request
	TypeReply   Type = "R" // "I no longer hold this key"
	TypeNotify  Type = "M" // "pull the inbox of this key": it has new offline messages
	TypeMove    Type = "V" // a step of a move (datadriver's MoveTo), in Body
)

// The Purposes of requests: a restore's (Driver.RestoreAt) and an erasure's
// (Driver.Wipe); the holder tells its player why the session ends.
const (
	PurposeRestore = "restore"
	PurposeWipe    = "wipe"
)

// maxPurposeBytes is the longest Purpose accepted.
const maxPurposeBytes = 32

// The size limits of a message: a real one is well under 1 KiB; a move
// carries a whole profile, under the 1 MiB a NATS server takes by default.
const (
	DefaultMaxBytes     = 2048
	DefaultMaxMoveBytes = 1000 << 10
)

// maxJobIDBytes is the longest JobID (and subject prefix token) accepted.
const maxJobIDBytes = jobid.MaxBytes

// macSize is the length of a message's MAC: one HMAC-SHA256.
const macSize = sha256.Size

// Message is one message of the handoff protocol (its Type says which).
// Stamp and MAC belong to the bus: a Handler sees a MAC only on a message
// its bus verified.
type Message struct {
	Type      Type
	Driver    string
	Key       string
	Requester string // requester's JobID; required in a request
	Token     string // lock token the requester saw (requests)
	Purpose   string // why a request asks, when not for a join: PurposeRestore, PurposeWipe
	Sender    string // the sender's JobID; required when signed

	TraceParent, TraceState string // W3C trace context of the sender's span

	Body  string // a move's payload, opaque here
	Stamp int64  // when a keyed bus signed it, Unix ms on its clock
	MAC   string // HMAC-SHA256 of the message, or "" when unsigned
}

// validate is the one rule both Encode and Decode apply, so whatever Decode
// accepts Encode writes back unchanged.
func (m Message) validate() error {
	switch m.Type {
	case "":
		return fmt.Errorf("%w: missing type (T)", ErrMalformed)
	case TypeRequest, TypeReply, TypeNotify:
		if m.Body != "" {
			return fmt.Errorf("%w: body (Y) in a message of type %s", ErrMalformed, m.Type)
		}
	case TypeMove:
		if m.Body == "" || m.Sender == "" {
			return fmt.Errorf("%w: a move needs its body (Y) and sender (S)", ErrMalformed)
		}
	default:
		return fmt.Errorf("%w %.16q", ErrUnknownType, string(m.Type))
	}
	if m.Driver == "" {
		return fmt.Errorf("%w: missing driver (D)", ErrMalformed)
	}
	if m.Key == "" {
		return fmt.Errorf("%w: missing key (K)", ErrMalformed)
	}
	if m.Type == TypeRequest && m.Requester == "" {
		return fmt.Errorf("%w: request without requester (R)", ErrMalformed)
	}
	if m.Requester != "" {
		if err := validJobID(m.Requester); err != nil {
			return fmt.Errorf("%w: requester (R): %w", ErrMalformed, err)
		}
	}
	if m.Sender != "" {
		if err := validJobID(m.Sender); err != nil {
			return fmt.Errorf("%w: sender (S): %w", ErrMalformed, err)
		}
		if m.Type == TypeRequest && m.Requester != m.Sender {
			return fmt.Errorf("%w: request from sender (S) %q names another requester (R) %q", ErrMalformed, m.Sender, m.Requester)
		}
	}
	if m.Purpose != "" {
		if m.Type != TypeRequest {
			return fmt.Errorf("%w: purpose (U) on a message that is not a request", ErrMalformed)
		}
		if !validPurpose(m.Purpose) {
			return fmt.Errorf("%w: purpose (U) %.40q: want a lower-case word of at most %d bytes", ErrMalformed,
				m.Purpose, maxPurposeBytes)
		}
	}
	if m.TraceParent != "" {
		if err := validTraceParent(m.TraceParent); err != nil {
			return fmt.Errorf("%w: trace parent (P): %w", ErrMalformed, err)
		}
	}
	if m.TraceState != "" {
		if m.TraceParent == "" {
			return fmt.Errorf("%w: trace state (A) without trace parent (P)", ErrMalformed)
		}
		if err := validTraceState(m.TraceState); err != nil {
			return fmt.Errorf("%w: trace state (A): %w", ErrMalformed, err)
		}
	}
	switch {
	case m.MAC == "" && m.Stamp != 0:
		return fmt.Errorf("%w: stamp (W) without MAC (H)", ErrMalformed)
	case m.MAC == "":
	case len(m.MAC) != macSize:
		return fmt.Errorf("%w: MAC (H) of %d bytes, want %d", ErrMalformed, len(m.MAC), macSize)
	case m.Sender == "":
		return fmt.Errorf("%w: MAC (H) without sender (S)", ErrMalformed)
	}
	return nil
}

// Encode validates m and returns its wire form (a msgpack map; the table
// is in docs/bus.md). It fails with ErrUnknownType or ErrMalformed for a
// message the protocol does not allow; it applies no size limit.
func Encode(m Message) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	strs := [...]struct{ key, val string }{
		{"T", string(m.Type)}, {"D", m.Driver}, {"K", m.Key},
		{"R", m.Requester}, {"L", m.Token}, {"S", m.Sender},
		{"P", m.TraceParent}, {"A", m.TraceState}, {"U", m.Purpose},
	}
	n := 0
	for _, f := range strs {
		if f.val != "" {
			n++
		}
	}
	if m.Body != "" {
		n++
	}
	if m.MAC != "" {
		n += 2
	}
	var buf bytes.Buffer
	buf.Grow(32 + len(m.Driver) + len(m.Key) + len(m.Requester) + len(m.Token) + len(m.Sender) +
		len(m.TraceParent) + len(m.TraceState) + len(m.Purpose) + len(m.MAC) + len(m.Body))
	e := msgpack.NewEncoder(&buf)
	// A bytes.Buffer does not fail, so neither does the encoder; the errors
	// are joined anyway rather than dropped.
	errs := []error{e.EncodeMapLen(n)}
	for _, f := range strs {
		if f.val != "" {
			errs = append(errs, e.EncodeString(f.key), e.EncodeString(f.val))
		}
	}
	if m.Body != "" {
		errs = append(errs, e.EncodeString("Y"), e.EncodeBytes([]byte(m.Body)))
	}
	if m.MAC != "" {
		errs = append(errs, e.EncodeString("W"), e.EncodeInt(m.Stamp),
			e.EncodeString("H"), e.EncodeBytes([]byte(m.MAC)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode parses one wire message, refusing one longer than maxBytes (<= 0:
// DefaultMaxBytes) with ErrTooLarge before decoding it, an unknown type with
// ErrUnknownType and anything Encode would not write with ErrMalformed. It
// never panics. It checks only the form of a MAC.
func Decode(b []byte, maxBytes int) (Message, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) > maxBytes {
		return Message{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), maxBytes)
	}
	m, err := decodeMap(b)
	if err != nil {
		return Message{}, err
	}
	if err := m.validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// decodeMap reads the map of b into a Message without judging its content.
func decodeMap(b []byte) (Message, error) {
	var m Message
	r := msgpackwire.Reader{B: b}
	c, err := r.Code()
	if err != nil {
		return m, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if !msgpackwire.IsMap(c) {
		return m, fmt.Errorf("%w: not a map (code 0x%02x)", ErrMalformed, c)
	}
	n, err := r.MapLen(c) // every entry takes at least two bytes
	if err != nil {
		return m, fmt.Errorf("%w: map header: %w", ErrMalformed, err)
	}

	var typ string
	var seen []string     // known keys read so far; at most 11
	var stamped, mac bool // W and H held a value, not nil
	for range n {
		key, err := decodeString(&r, false)
		if err != nil {
			return m, fmt.Errorf("%w: map key: %w", ErrMalformed, err)
		}
		var dst *string
		switch key {
		case "T":
			dst = &typ
		case "D":
			dst = &m.Driver
		case "K":
			dst = &m.Key
		case "R":
			dst = &m.Requester
		case "L":
			dst = &m.Token
		case "S":
			dst = &m.Sender
		case "P":
			dst = &m.TraceParent
		case "A":
			dst = &m.TraceState
		case "U":
			dst = &m.Purpose
		case "W", "H", "Y":
		default:
			if _, err := r.Skip(); err != nil {
				return m, fmt.Errorf("%w: field %.16q: %w", ErrMalformed, key, err)
			}
			continue
		}
		if slices.Contains(seen, key) {
			return m, fmt.Errorf("%w: field %s given twice", ErrMalformed, key)
		}
		seen = append(seen, key)
		switch key {
		case "W":
			stamped, err = decodeStamp(&r, &m.Stamp)
		case "H":
			m.MAC, mac, err = decodeMAC(&r)
		case "Y":
			m.Body, err = decodeBody(&r)
		default:
			*dst, err = decodeString(&r, true)
		}
		if err != nil {
			return m, fmt.Errorf("%w: field %s: %w", ErrMalformed, key, err)
		}
	}
	m.Type = Type(typ)
	if r.Left() != 0 {
		return m, fmt.Errorf("%w: %d bytes after the map", ErrMalformed, r.Left())
	}
	if stamped != mac {
		return m, fmt.Errorf("%w: a stamp (W) and a MAC (H) come together or not at all", ErrMalformed)
	}
	return m, nil
}

// decodeStamp reads a msgpack integer that fits an int64 into *dst, and
// reports false for nil.
func decodeStamp(r *msgpackwire.Reader, dst *int64) (bool, error) {
	c, err := r.Code()
	if err != nil || c == msgpcode.Nil {
		return false, err
	}
	u, neg, err := r.Integer(c, "a stamp")
	switch {
	case err != nil:
		return false, err
	case !neg && u > math.MaxInt64:
		return false, fmt.Errorf("integer %d does not fit an int64", u)
	}
	*dst = int64(u)
	return true, nil
}

// decodeMAC reads a msgpack bin of macSize bytes, and reports false for
// nil.
func decodeMAC(r *msgpackwire.Reader) (string, bool, error) {
	c, err := r.Code()
	switch {
	case err != nil || c == msgpcode.Nil:
		return "", false, err
	case !msgpackwire.IsBin(c):
		return "", false, &msgpackwire.TypeError{Code: c, Want: "a MAC (bin)"}
	}
	n, _, err := r.Length(c)
	if err != nil {
		return "", false, err
	}
	if n != macSize {
		return "", false, fmt.Errorf("bin of %d bytes, want %d", n, macSize)
	}
	p, err := r.Next(n)
	return string(p), err == nil, err
}

// decodeBody reads a msgpack bin (nil reads as "").
func decodeBody(r *msgpackwire.Reader) (string, error) {
	c, err := r.Code()
	switch {
	case err != nil || c == msgpcode.Nil:
		return "", err
	case !msgpackwire.IsBin(c):
		return "", &msgpackwire.TypeError{Code: c, Want: "a body (bin)"}
	}
	n, _, err := r.Length(c)
	if err != nil {
		return "", err
	}
	p, err := r.Next(n)
	return string(p), err
}

// limitOf is the size limit of a message of type t on a bus whose limit is
// maxBytes: a move's is DefaultMaxMoveBytes (or maxBytes when larger).
func limitOf(t Type, maxBytes int) int {
	if t == TypeMove {
		return max(maxBytes, DefaultMaxMoveBytes)
	}
	return maxBytes
}

// decodeString reads a msgpack str (never a bin); with nilOK, nil reads as
// "".
func decodeString(r *msgpackwire.Reader, nilOK bool) (string, error) {
	c, err := r.Code()
	switch {
	case err != nil:
		return "", err
	case c == msgpcode.Nil && nilOK:
		return "", nil
	case !msgpackwire.IsStr(c):
		return "", &msgpackwire.TypeError{Code: c, Want: "a string"}
	}
	p, _, err := r.Str(c, "a string")
	return string(p), err
}

// validJobID reports whether jobID can be used as a server's JobID, which is
// one token of a NATS subject: non-empty, at most maxJobIDBytes bytes, valid
// UTF-8, and free of whitespace, control characters, '.', '*' and '>'. The
// error wraps errInvalidJobID and says what is wrong.
func validJobID(jobID string) error {
	if reason := jobid.Problem(jobID); reason != "" {
		return fmt.Errorf("%w: %s", errInvalidJobID, reason)
	}
	return nil
}

// validPurpose reports whether p is a lower-case word (a-z and '_') of at
// most maxPurposeBytes.
func validPurpose(p string) bool {
	if len(p) == 0 || len(p) > maxPurposeBytes {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
