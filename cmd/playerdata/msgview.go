package main

// Profile data shown as JSON without knowing the game's type: the msgpack
// the servers store is walked value by value, and what does not decode is
// reported with the byte offset where decoding failed.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxDataDepth bounds the nesting of decoded data: deeper data is refused
// as corrupt, as the servers' codec (internal/datacodec) refuses it.
const maxDataDepth = 1000

// timeExtType is msgpack's timestamp extension (msgpack v5 also reads 13,
// which some JavaScript encoders write).
const timeExtType, jsTimeExtType = -1, 13

// dataError says where stored data stops being msgpack.
type dataError struct {
	// Offset is the byte at which decoding failed (from the data's start).
	Offset int `json:"offset"`
	// Reason says what was wrong there.
	Reason string `json:"reason"`
}

func (e *dataError) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Reason) }

// msgpackJSON decodes one msgpack value from b and returns it as JSON, and
// how many bytes it took (b may hold more; the servers' codec refuses data
// with bytes after the value, msgpack.Unmarshal ignores them). Maps keep their stored
// order; a key that is not a string is shown as the string of its JSON
// (42 → "42"); bin is base64, as encoding/json shows []byte; a timestamp
// extension is an RFC 3339 string, another extension an object {"ext":
// type, "base64": data}; a float that JSON cannot hold (NaN, ±Inf) is a
// string. A value that does not decode answers a *dataError.
func msgpackJSON(b []byte) (json.RawMessage, int, error) {
	d := &msgDecoder{b: b}
	var out bytes.Buffer
	if err := d.value(&out, 0); err != nil {
		return nil, d.off, err
	}
	return out.Bytes(), d.off, nil
}

// msgDecoder walks msgpack in b from off.
type msgDecoder struct {
	b   []byte
	off int
}

// fail returns a *dataError at offset at.
func (d *msgDecoder) fail(at int, format string, a ...any) error {
	return &dataError{Offset: at, Reason: fmt.Sprintf(format, a...)}
}

// take returns the next n bytes, or a *dataError naming what was cut
// short, at start (the offset of the value they belong to).
func (d *msgDecoder) take(n int, start int, what string) ([]byte, error) {
	if n < 0 || n > len(d.b)-d.off {
		return nil, d.fail(start, "%s needs %d bytes, only %d left: the data is cut short", what, n, len(d.b)-d.off)
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

// uint reads a big-endian unsigned integer of n bytes (1, 2, 4 or 8).
func (d *msgDecoder) uint(n int, start int, what string) (uint64, error) {
	p, err := d.take(n, start, what)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

// length reads an n-byte length and checks it against what is left, each
// element taking at least minBytes (so a forged count cannot make the
// decoder loop or allocate for nothing).
func (d *msgDecoder) length(n int, start int, what string, minBytes int) (int, error) {
	v, err := d.uint(n, start, what+" length")
	if err != nil {
		return 0, err
	}
	if left := len(d.b) - d.off; v > uint64(left/minBytes) {
		return 0, d.fail(start, "%s of %d claims more than the %d bytes left: the data is cut short or corrupt", what, v, left)
	}
	return int(v), nil
}

// value decodes one value at depth into out.
func (d *msgDecoder) value(out *bytes.Buffer, depth int) error {
	start := d.off
	if depth > maxDataDepth {
		return d.fail(start, "nested deeper than %d levels", maxDataDepth)
	}
	p, err := d.take(1, start, "a value")
	if err != nil {
		return d.fail(start, "the data ends where a value should begin")
	}
	c := p[0]
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		out.WriteString(strconv.Itoa(int(c)))
		return nil
	case c >= msgpcode.NegFixedNumLow:
		out.WriteString(strconv.Itoa(int(int8(c))))
		return nil
	case msgpcode.IsFixedMap(c):
		return d.mapBody(out, int(c&msgpcode.FixedMapMask), depth)
	case msgpcode.IsFixedArray(c):
		return d.arrayBody(out, int(c&msgpcode.FixedArrayMask), depth)
	case msgpcode.IsFixedString(c):
		return d.str(out, int(c&msgpcode.FixedStrMask), start)
	}
	switch c {
	case msgpcode.Nil:
		out.WriteString("null")
	case msgpcode.False:
		out.WriteString("false")
	case msgpcode.True:
		out.WriteString("true")
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64:
		v, err := d.uint(1<<(c-msgpcode.Uint8), start, "an unsigned integer")
		if err != nil {
			return err
		}
		out.WriteString(strconv.FormatUint(v, 10))
	case msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		n := 1 << (c - msgpcode.Int8)
		v, err := d.uint(n, start, "an integer")
		if err != nil {
			return err
		}
		shift := 64 - 8*n // sign-extend
		out.WriteString(strconv.FormatInt(int64(v<<shift)>>shift, 10))
	case msgpcode.Float:
		v, err := d.uint(4, start, "a float")
		if err != nil {
			return err
		}
		writeFloat(out, float64(math.Float32frombits(uint32(v))), 32)
	case msgpcode.Double:
		v, err := d.uint(8, start, "a double")
		if err != nil {
			return err
		}
		writeFloat(out, math.Float64frombits(v), 64)
	case msgpcode.Str8, msgpcode.Str16, msgpcode.Str32:
		n, err := d.length(1<<(c-msgpcode.Str8), start, "a string", 1)
		if err != nil {
			return err
		}
		return d.str(out, n, start)
	case msgpcode.Bin8, msgpcode.Bin16, msgpcode.Bin32:
		n, err := d.length(1<<(c-msgpcode.Bin8), start, "a binary", 1)
		if err != nil {
			return err
		}
		raw, _ := d.take(n, start, "a binary")
		writeJSONString(out, base64.StdEncoding.EncodeToString(raw))
	case msgpcode.Array16, msgpcode.Array32:
		n, err := d.length(2<<(c-msgpcode.Array16), start, "an array", 1)
		if err != nil {
			return err
		}
		return d.arrayBody(out, n, depth)
	case msgpcode.Map16, msgpcode.Map32:
		n, err := d.length(2<<(c-msgpcode.Map16), start, "a map", 2)
		if err != nil {
			return err
		}
		return d.mapBody(out, n, depth)
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16:
		return d.ext(out, 1<<(c-msgpcode.FixExt1), start)
	case msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32:
		n, err := d.length(1<<(c-msgpcode.Ext8), start, "an extension", 1)
		if err != nil {
			return err
		}
		return d.ext(out, n, start)
	default: // 0xc1, the one code msgpack never uses
		return d.fail(start, "byte 0x%02x begins no msgpack value", c)
	}
	return nil
}

// str writes a string of n bytes (invalid UTF-8 is shown as U+FFFD).
func (d *msgDecoder) str(out *bytes.Buffer, n, start int) error {
	p, err := d.take(n, start, "a string")
	if err != nil {
		return err
	}
	writeJSONString(out, string(p))
	return nil
}

// arrayBody writes n values as a JSON array.
func (d *msgDecoder) arrayBody(out *bytes.Buffer, n, depth int) error {
	out.WriteByte('[')
	for i := range n {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := d.value(out, depth+1); err != nil {
			return err
		}
	}
	out.WriteByte(']')
	return nil
}

// mapBody writes n key/value pairs as a JSON object, keys as strings.
func (d *msgDecoder) mapBody(out *bytes.Buffer, n, depth int) error {
	out.WriteByte('{')
	var key bytes.Buffer
	for i := range n {
		if i > 0 {
			out.WriteByte(',')
		}
		key.Reset()
		if err := d.value(&key, depth+1); err != nil {
			return err
		}
		if k := key.Bytes(); len(k) > 0 && k[0] == '"' {
			out.Write(k)
		} else {
			writeJSONString(out, string(k)) // 42 → "42", [1,2] → "[1,2]"
		}
		out.WriteByte(':')
		if err := d.value(out, depth+1); err != nil {
			return err
		}
	}
	out.WriteByte('}')
	return nil
}

// ext writes an extension value of n data bytes (after its type byte).
func (d *msgDecoder) ext(out *bytes.Buffer, n, start int) error {
	t, err := d.take(1, start, "an extension type")
	if err != nil {
		return err
	}
	typ := int8(t[0])
	p, err := d.take(n, start, "an extension")
	if err != nil {
		return err
	}
	if typ == timeExtType || typ == jsTimeExtType {
		var tm time.Time
		switch n {
		case 4:
			tm = time.Unix(int64(binary.BigEndian.Uint32(p)), 0)
		case 8:
			v := binary.BigEndian.Uint64(p)
			tm = time.Unix(int64(v&0x3ffffffff), int64(v>>34))
		case 12:
			tm = time.Unix(int64(binary.BigEndian.Uint64(p[4:])), int64(binary.BigEndian.Uint32(p)))
		default:
			return d.fail(start, "a timestamp of %d bytes (want 4, 8 or 12)", n)
		}
		writeJSONString(out, tm.UTC().Format(time.RFC3339Nano))
		return nil
	}
	fmt.Fprintf(out, `{"ext":%d,"base64":`, typ)
	writeJSONString(out, base64.StdEncoding.EncodeToString(p))
	out.WriteByte('}')
	return nil
}

// writeFloat writes f as a JSON number, or as a string when JSON has none
// for it (NaN, ±Inf).
func writeFloat(out *bytes.Buffer, f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		writeJSONString(out, strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	out.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
}

// writeJSONString writes s as a JSON string, without escaping <, > and &.
func writeJSONString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
}
