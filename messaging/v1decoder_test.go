package messaging

// This file keeps the decoder of the first wire version (without the
// sender, trace context, notify type and MAC), frozen, so tests
// can check what a server running an older build does with what this one
// sends. Only identifiers are renamed; do not update it.

import (
	"bytes"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// v1Message is the Message of the first wire version.
type v1Message struct {
	Type      Type
	Driver    string
	Key       string
	Requester string
	Token     string
}

func (m v1Message) validate() error {
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
		if err := validJobID(m.Requester); err != nil {
			return fmt.Errorf("%w: requester (R): %w", ErrMalformed, err)
		}
	}
	return nil
}

func v1Decode(b []byte, maxBytes int) (v1Message, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(b) > maxBytes {
		return v1Message{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), maxBytes)
	}
	m, err := v1DecodeMap(b)
	if err != nil {
		return v1Message{}, err
	}
	if err := m.validate(); err != nil {
		return v1Message{}, err
	}
	return m, nil
}

const (
	v1SeenType = 1 << iota
	v1SeenDriver
	v1SeenKey
	v1SeenRequester
	v1SeenToken
)

// v1DecodeMap reads the map of b into a v1Message without judging its content.
func v1DecodeMap(b []byte) (v1Message, error) {
	var m v1Message
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)

	c, err := d.PeekCode()
	if err != nil {
		return m, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if !v1IsMap(c) {
		return m, fmt.Errorf("%w: not a map (code 0x%02x)", ErrMalformed, c)
	}
	n, err := d.DecodeMapLen()
	if err != nil {
		return m, v1Malformed(err)
	}
	if n > r.Len()/2 { // every entry takes at least two bytes
		return m, fmt.Errorf("%w: map of %d entries in %d bytes", ErrMalformed, n, r.Len())
	}

	var typ string
	seen := 0
	for range n {
		key, err := v1DecodeString(d, r, false)
		if err != nil {
			return m, fmt.Errorf("%w: map key: %w", ErrMalformed, err)
		}
		var dst *string
		var bit int
		switch key {
		case "T":
			dst, bit = &typ, v1SeenType
		case "D":
			dst, bit = &m.Driver, v1SeenDriver
		case "K":
			dst, bit = &m.Key, v1SeenKey
		case "R":
			dst, bit = &m.Requester, v1SeenRequester
		case "L":
			dst, bit = &m.Token, v1SeenToken
		default:
			if err := v1SkipValue(d, r); err != nil {
				return m, v1Malformed(err)
			}
			continue
		}
		if seen&bit != 0 {
			return m, fmt.Errorf("%w: field %s given twice", ErrMalformed, key)
		}
		seen |= bit
		if *dst, err = v1DecodeString(d, r, true); err != nil {
			return m, fmt.Errorf("%w: field %s: %w", ErrMalformed, key, err)
		}
	}
	m.Type = Type(typ)
	if r.Len() != 0 {
		return m, fmt.Errorf("%w: %d bytes after the map", ErrMalformed, r.Len())
	}
	return m, nil
}

func v1DecodeString(d *msgpack.Decoder, r *bytes.Reader, nilOK bool) (string, error) {
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

func v1SkipValue(d *msgpack.Decoder, r *bytes.Reader) error {
	for pending := 1; pending > 0; pending-- {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		var values, payload int
		switch {
		case v1IsMap(c):
			values, err = d.DecodeMapLen()
			values *= 2
		case v1IsArray(c):
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

func v1IsMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func v1IsArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func v1Malformed(err error) error {
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}
