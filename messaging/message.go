package messaging

import (
	"bytes"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Type is a message type on the wire.
type Type string

// The message types of the handoff protocol.
const (
	TypeRequest Type = "Q" // release request
	TypeReply   Type = "R" // "I no longer hold this key"
)

// DefaultMaxBytes is the size limit of a wire message: a real one is a few
// short strings (well under 512 bytes with 128-byte JobIDs), so 2 KiB leaves
// room for long keys and names while bounding the work a hostile sender buys.
const DefaultMaxBytes = 2048

// MaxJobIDBytes is the longest JobID (and subject prefix token) accepted.
const MaxJobIDBytes = 128

// Message is one wire message; msgpack map with short keys.
//
// A request (TypeRequest) asks the server holding Driver/Key to release it
// and to reply to Requester; Token is the lock token the requester saw, so a
// late or forged request can be told apart from one naming the current lock.
// A reply (TypeReply) tells the requester that the sender no longer holds
// Driver/Key.
type Message struct {
	Type      Type   `msgpack:"T"`
	Driver    string `msgpack:"D"`
	Key       string `msgpack:"K"`
	Requester string `msgpack:"R,omitempty"` // requester's JobID (requests)
	Token     string `msgpack:"L,omitempty"` // lock token the requester saw (requests)
}

// validate is the one rule both Encode and Decode apply, so whatever Decode
// accepts Encode writes back unchanged.
func (m Message) validate() error {
	switch m.Type {
	case "":
		return fmt.Errorf("%w: missing type (T)", ErrMalformed)
	case TypeRequest, TypeReply:
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
	return nil
}

// Encode validates m and returns its wire form: a msgpack map with the keys
// T, D and K, plus R and L when they are set.
//
// It fails with ErrUnknownType for a type other than TypeRequest and
// TypeReply, and with ErrMalformed for a missing type, driver or key, a
// request without a requester, or a requester that is not a valid JobID (that
// error also wraps ErrInvalidJobID). Encode applies no size limit; a bus
// checks the encoded length against its own.
func Encode(m Message) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	b, err := msgpack.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}

// Decode parses one wire message. It never panics, whatever b holds.
//
// A b longer than maxBytes fails with ErrTooLarge before any decoding
// (maxBytes <= 0 means DefaultMaxBytes). A type other than TypeRequest or
// TypeReply fails with ErrUnknownType. Anything else that is not a message
// Encode would accept fails with ErrMalformed: invalid or truncated msgpack, a
// value that is not a map, a non-string key, a known field holding something
// other than a string, a field given twice, a missing required field, a
// requester that is not a valid JobID, or bytes after the map. Fields with other keys are skipped, and a nil value
// counts as an absent field, so newer senders may add fields.
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

// Bits of the fields seen by decodeMap, to refuse duplicates.
const (
	seenType = 1 << iota
	seenDriver
	seenKey
	seenRequester
	seenToken
)

// decodeMap reads the map of b into a Message without judging its content.
func decodeMap(b []byte) (Message, error) {
	var m Message
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)

	c, err := d.PeekCode()
	if err != nil {
		return m, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if !isMap(c) {
		return m, fmt.Errorf("%w: not a map (code 0x%02x)", ErrMalformed, c)
	}
	n, err := d.DecodeMapLen()
	if err != nil {
		return m, malformed(err)
	}
	if n > r.Len()/2 { // every entry takes at least two bytes
		return m, fmt.Errorf("%w: map of %d entries in %d bytes", ErrMalformed, n, r.Len())
	}

	var typ string
	seen := 0
	for range n {
		key, err := decodeString(d, r, false)
		if err != nil {
			return m, fmt.Errorf("%w: map key: %w", ErrMalformed, err)
		}
		var dst *string
		var bit int
		switch key {
		case "T":
			dst, bit = &typ, seenType
		case "D":
			dst, bit = &m.Driver, seenDriver
		case "K":
			dst, bit = &m.Key, seenKey
		case "R":
			dst, bit = &m.Requester, seenRequester
		case "L":
			dst, bit = &m.Token, seenToken
		default:
			if err := skipValue(d, r); err != nil {
				return m, malformed(err)
			}
			continue
		}
		if seen&bit != 0 {
			return m, fmt.Errorf("%w: field %s given twice", ErrMalformed, key)
		}
		seen |= bit
		if *dst, err = decodeString(d, r, true); err != nil {
			return m, fmt.Errorf("%w: field %s: %w", ErrMalformed, key, err)
		}
	}
	m.Type = Type(typ)
	if r.Len() != 0 {
		return m, fmt.Errorf("%w: %d bytes after the map", ErrMalformed, r.Len())
	}
	return m, nil
}

// decodeString reads a msgpack str; with nilOK, nil reads as "".
func decodeString(d *msgpack.Decoder, r *bytes.Reader, nilOK bool) (string, error) {
	c, err := d.PeekCode()
	if err != nil {
		return "", fmt.Errorf("truncated: %v", err)
	}
	switch {
	case msgpcode.IsString(c):
		n, err := d.DecodeBytesLen()
		if err != nil {
			return "", fmt.Errorf("truncated: %v", err)
		}
		if n > r.Len() {
			return "", fmt.Errorf("truncated: string of %d bytes, %d left", n, r.Len())
		}
		buf := make([]byte, n)
		if err := d.ReadFull(buf); err != nil {
			return "", fmt.Errorf("truncated: %v", err)
		}
		return string(buf), nil
	case c == msgpcode.Nil && nilOK:
		return "", d.DecodeNil()
	default:
		return "", fmt.Errorf("want a string, got code 0x%02x", c)
	}
}

// skipValue skips one msgpack value of any kind. It reads every length
// itself and refuses one larger than the bytes left before skipping, so a
// hostile length costs nothing (msgpack would allocate up to 1 MiB for it),
// and it keeps a count instead of recursing, so nesting costs no stack.
func skipValue(d *msgpack.Decoder, r *bytes.Reader) error {
	for pending := 1; pending > 0; pending-- {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		var values, payload int
		switch {
		case isMap(c):
			values, err = d.DecodeMapLen()
			values *= 2
		case isArray(c):
			values, err = d.DecodeArrayLen()
		case msgpcode.IsString(c) || msgpcode.IsBin(c):
			payload, err = d.DecodeBytesLen()
		case msgpcode.IsExt(c):
			_, payload, err = d.DecodeExtHeader()
		default:
			err = d.Skip() // nil, bool or number: a fixed size, no nesting
		}
		if err != nil {
			return err
		}
		if payload > r.Len() {
			return fmt.Errorf("value of %d bytes, %d left", payload, r.Len())
		}
		// The decoder reads r directly (a bytes.Reader needs no buffering),
		// so moving r moves the decoder.
		if _, err := r.Seek(int64(payload), io.SeekCurrent); err != nil {
			return err
		}
		pending += values
		if pending-1 > r.Len() { // every value takes at least one byte
			return fmt.Errorf("container of %d values, %d bytes left", values, r.Len())
		}
	}
	return nil
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

// malformed wraps a msgpack decoding error; the msgpack error is text only,
// so callers match ErrMalformed and nothing else.
func malformed(err error) error {
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

// ValidJobID reports whether jobID can be used as a server's JobID, which is
// one token of a NATS subject: non-empty, at most MaxJobIDBytes bytes, valid
// UTF-8, and free of whitespace, control characters, '.', '*' and '>'. The
// error wraps ErrInvalidJobID and says what is wrong.
func ValidJobID(jobID string) error {
	if reason := tokenProblem(jobID); reason != "" {
		return fmt.Errorf("%w: %s", ErrInvalidJobID, reason)
	}
	return nil
}

// tokenProblem returns why s is not a valid subject token, or "".
func tokenProblem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxJobIDBytes:
		return fmt.Sprintf("%d bytes, limit %d", len(s), MaxJobIDBytes)
	case !utf8.ValidString(s):
		return fmt.Sprintf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		switch {
		case r == '.' || r == '*' || r == '>':
			return fmt.Sprintf("%q contains %q", s, r)
		case unicode.IsSpace(r):
			return fmt.Sprintf("%q contains whitespace %U", s, r)
		case unicode.IsControl(r):
			return fmt.Sprintf("%q contains control character %U", s, r)
		}
	}
	return ""
}
