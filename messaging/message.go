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
	// TypeMove is one step of a move (datadriver's Profile.MoveTo): its Body,
	// opaque here, says which (prepare, accept, refuse, commit) and carries
	// the moved profile.
	TypeMove Type = "V"
)

// DefaultMaxMoveBytes is the size limit of a move message (TypeMove), which
// carries a whole profile: under the 1 MiB a NATS server accepts by
// default, with room for the headers.
const DefaultMaxMoveBytes = 1000 << 10

// PurposeRestore is the Purpose of a request made by a restore
// (Driver.RestoreAt, playerdata restore).
const PurposeRestore = "restore"

// PurposeWipe is the Purpose of a request made by Driver.Wipe (an erasure
// request): the holder tells its player their data is being erased.
const PurposeWipe = "wipe"

// MaxPurposeBytes is the longest Purpose accepted.
const MaxPurposeBytes = 32

// DefaultMaxBytes is the size limit of a wire message: a real one is a few
// short strings (well under 1 KiB with 128-byte JobIDs, a trace context and
// a MAC), so 2 KiB leaves room for long keys and names while bounding the
// work a hostile sender buys.
const DefaultMaxBytes = 2048

// MaxJobIDBytes is the longest JobID (and subject prefix token) accepted.
const MaxJobIDBytes = jobid.MaxBytes

// MACSize is the length of a message's MAC: one HMAC-SHA256.
const MACSize = sha256.Size

// Message is one wire message: a msgpack map with one-letter keys (see
// Encode for the table).
//
// A request (TypeRequest) asks the server holding Driver/Key to release it
// and to reply to Requester; Token is the lock token the requester saw, so a
// late or forged request can be told apart from one naming the current lock.
// A reply (TypeReply) tells the requester that the sender no longer holds
// Driver/Key. A notify (TypeNotify) tells the server holding Driver/Key that
// the key's inbox has new messages to pull.
//
// Sender, TraceParent and TraceState are optional on every type; a message
// from an older build has none of them. Stamp and MAC belong to the bus: a
// NATSBus with a key (WithKey) sets them on every publish and checks them on
// every delivery, and a bus without one clears them on both sides, so a
// Handler sees a MAC only on a message its bus has verified.
//
// Message is comparable with ==; the zero Message is not a valid one.
type Message struct {
	Type      Type
	Driver    string
	Key       string
	Requester string // requester's JobID; required in a request
	Token     string // lock token the requester saw (requests)
	// Purpose says why a request asks for the key, when not for a player's
	// join: PurposeRestore for a restore (the holder tells its player so).
	// Requests only; a lower-case word of at most MaxPurposeBytes, and a
	// receiver treats a purpose it does not know as a plain request. A
	// message from an older build has none.
	Purpose string

	// Sender is the JobID of the server that sent the message. A signed
	// message must name it; a request that names it must name the same
	// server as Requester.
	Sender string
	// TraceParent is a W3C traceparent (see ValidTraceParent): the span of
	// the sender that the receiver's work continues. TraceState is the W3C
	// tracestate that goes with it (see ValidTraceState); it needs a
	// TraceParent.
	TraceParent, TraceState string

	// Body is the payload of a move (TypeMove only, where it is required),
	// opaque to this package, at most DefaultMaxMoveBytes with the rest.
	Body string

	// Stamp is when a keyed bus signed the message, in Unix milliseconds on
	// the sending bus's clock; it travels only with a MAC.
	Stamp int64
	// MAC is the HMAC-SHA256 of the message (MACSize raw bytes), or "" for
	// an unsigned message. See the package documentation for what it covers.
	MAC string
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
		if err := ValidJobID(m.Requester); err != nil {
			return fmt.Errorf("%w: requester (R): %w", ErrMalformed, err)
		}
	}
	if m.Sender != "" {
		if err := ValidJobID(m.Sender); err != nil {
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
				m.Purpose, MaxPurposeBytes)
		}
	}
	if m.TraceParent != "" {
		if err := ValidTraceParent(m.TraceParent); err != nil {
			return fmt.Errorf("%w: trace parent (P): %w", ErrMalformed, err)
		}
	}
	if m.TraceState != "" {
		if m.TraceParent == "" {
			return fmt.Errorf("%w: trace state (A) without trace parent (P)", ErrMalformed)
		}
		if err := ValidTraceState(m.TraceState); err != nil {
			return fmt.Errorf("%w: trace state (A): %w", ErrMalformed, err)
		}
	}
	switch {
	case m.MAC == "" && m.Stamp != 0:
		return fmt.Errorf("%w: stamp (W) without MAC (H)", ErrMalformed)
	case m.MAC == "":
	case len(m.MAC) != MACSize:
		return fmt.Errorf("%w: MAC (H) of %d bytes, want %d", ErrMalformed, len(m.MAC), MACSize)
	case m.Sender == "":
		return fmt.Errorf("%w: MAC (H) without sender (S)", ErrMalformed)
	}
	return nil
}

// Encode validates m and returns its wire form, a msgpack map:
//
//	key  field        msgpack  when
//	T    Type         str      always
//	D    Driver       str      always
//	K    Key          str      always
//	R    Requester    str      set (always in a request)
//	L    Token        str      set
//	S    Sender       str      set
//	P    TraceParent  str      set
//	A    TraceState   str      set
//	U    Purpose      str      set (requests only)
//	Y    Body         bin      set (a move only)
//	W    Stamp        int      with a MAC
//	H    MAC          bin      set (MACSize bytes)
//
// Encode writes the keys in this order, each value in its shortest form, so
// equal messages encode to equal bytes, and a message with none of the
// fields after L encodes exactly as the first wire version did.
//
// It fails with ErrUnknownType for a type other than TypeRequest, TypeReply
// and TypeNotify, and with ErrMalformed for a missing type, driver or key, a
// request without a requester, a requester or sender that is not a valid
// JobID (that error also wraps ErrInvalidJobID), a request whose sender is
// not its requester, a trace context that is not valid (also wrapping
// ErrInvalidTrace) or a trace state without a trace parent, a MAC that is
// not MACSize bytes or comes without a sender, or a stamp without a MAC.
// Encode applies no size limit; a bus checks the encoded length against its
// own.
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

// Decode parses one wire message. It never panics, whatever b holds.
//
// A b longer than maxBytes fails with ErrTooLarge before any decoding
// (maxBytes <= 0 means DefaultMaxBytes). A type other than TypeRequest,
// TypeReply or TypeNotify fails with ErrUnknownType. Anything else that is
// not a message Encode would accept fails with ErrMalformed: invalid or
// truncated msgpack, a value that is not a map, a non-string key, a known
// field holding a value of the wrong msgpack type (W an integer that fits
// an int64, H bin, the others str), a field given twice, a stamp without a
// MAC or a MAC without a stamp, any of the rules Encode applies, or bytes
// after the map. Fields with other keys are skipped, and a nil value counts
// as an absent field, so newer senders may add fields.
//
// Decode checks only the form of a MAC; a bus with a key verifies it.
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

// decodeMAC reads a msgpack bin of MACSize bytes, and reports false for
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
	if n != MACSize {
		return "", false, fmt.Errorf("bin of %d bytes, want %d", n, MACSize)
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

// LimitOf is the size limit of a message of type t on a bus whose limit is
// maxBytes: a move's is DefaultMaxMoveBytes (or maxBytes when larger).
func LimitOf(t Type, maxBytes int) int {
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

// ValidJobID reports whether jobID can be used as a server's JobID, which is
// one token of a NATS subject: non-empty, at most MaxJobIDBytes bytes, valid
// UTF-8, and free of whitespace, control characters, '.', '*' and '>'. The
// error wraps ErrInvalidJobID and says what is wrong.
func ValidJobID(jobID string) error {
	if reason := jobid.Problem(jobID); reason != "" {
		return fmt.Errorf("%w: %s", ErrInvalidJobID, reason)
	}
	return nil
}

// validPurpose reports whether p is a lower-case word (a-z and '_') of at
// most MaxPurposeBytes.
func validPurpose(p string) bool {
	if len(p) == 0 || len(p) > MaxPurposeBytes {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
