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

	"github.com/ckernel/playerdata/internal/msgpackwire"
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
	d := &msgDecoder{r: msgpackwire.Reader{B: b}}
	var out bytes.Buffer
	if err := d.value(&out, 0); err != nil {
		return nil, d.r.Off, err
	}
	return out.Bytes(), d.r.Off, nil
}

// msgDecoder walks msgpack with the project's reader and writes JSON.
type msgDecoder struct {
	r msgpackwire.Reader
}

// fail returns a *dataError at offset at.
func (d *msgDecoder) fail(at int, format string, a ...any) error {
	return &dataError{Offset: at, Reason: fmt.Sprintf(format, a...)}
}

// need fails when fewer than n bytes are left, naming what was cut short,
// at start (the offset of the value they belong to).
func (d *msgDecoder) need(n int, start int, what string) error {
	if left := d.r.Left(); n < 0 || n > left {
		return d.fail(start, "%s needs %d bytes, only %d left: the data is cut short", what, n, left)
	}
	return nil
}

// take returns the next n bytes; see need.
func (d *msgDecoder) take(n int, start int, what string) ([]byte, error) {
	if err := d.need(n, start, what); err != nil {
		return nil, err
	}
	return d.r.Next(n)
}

// length reads the length that follows code c and checks a length that
// is not part of the code against what is left, each element taking at
// least minBytes (so a forged count cannot make the decoder loop or
// allocate for nothing).
func (d *msgDecoder) length(c byte, start int, what string, minBytes int) (int, error) {
	head := msgpackwire.HeadSize(c)
	if err := d.need(head, start, what+" length"); err != nil {
		return 0, err
	}
	n, _, err := d.r.Length(c)
	if err != nil {
		return 0, err
	}
	if left := d.r.Left(); head > 0 && n > left/minBytes {
		return 0, d.fail(start, "%s of %d claims more than the %d bytes left: the data is cut short or corrupt", what, n, left)
	}
	return n, nil
}

// value decodes one value at depth into out.
func (d *msgDecoder) value(out *bytes.Buffer, depth int) error {
	start := d.r.Off
	if depth > maxDataDepth {
		return d.fail(start, "nested deeper than %d levels", maxDataDepth)
	}
	c, err := d.r.Code()
	if err != nil {
		return d.fail(start, "the data ends where a value should begin")
	}
	switch {
	case msgpackwire.IsMap(c):
		n, err := d.length(c, start, "a map", 2)
		if err != nil {
			return err
		}
		return d.mapBody(out, n, depth)
	case msgpackwire.IsArray(c):
		n, err := d.length(c, start, "an array", 1)
		if err != nil {
			return err
		}
		return d.arrayBody(out, n, depth)
	case msgpackwire.IsStr(c):
		n, err := d.length(c, start, "a string", 1)
		if err != nil {
			return err
		}
		return d.str(out, n, start)
	case msgpackwire.IsBin(c):
		n, err := d.length(c, start, "a binary", 1)
		if err != nil {
			return err
		}
		return d.bin(out, n, start)
	case msgpackwire.IsExt(c):
		n, err := d.length(c, start, "an extension", 1)
		if err != nil {
			return err
		}
		return d.ext(out, n, start)
	}
	return d.scalar(out, c, start)
}

// scalar writes a value that is neither a container nor bytes: nil, a
// bool, a number.
func (d *msgDecoder) scalar(out *bytes.Buffer, c byte, start int) error {
	switch c {
	case msgpcode.Nil:
		out.WriteString("null")
		return nil
	case msgpcode.False:
		out.WriteString("false")
		return nil
	case msgpcode.True:
		out.WriteString("true")
		return nil
	case msgpcode.Float, msgpcode.Double:
		what, bits := "a double", 64
		if c == msgpcode.Float {
			what, bits = "a float", 32
		}
		if err := d.need(msgpackwire.HeadSize(c), start, what); err != nil {
			return err
		}
		f, err := d.r.Float(c, what)
		writeFloat(out, f, bits)
		return err
	}
	what := "an integer"
	if c >= msgpcode.Uint8 && c <= msgpcode.Uint64 {
		what = "an unsigned integer"
	}
	if err := d.need(msgpackwire.HeadSize(c), start, what); err != nil {
		return err
	}
	u, neg, err := d.r.Integer(c, "")
	if err != nil { // 0xc1, the one code msgpack never uses
		return d.fail(start, "byte 0x%02x begins no msgpack value", c)
	}
	if neg {
		out.WriteString(strconv.FormatInt(int64(u), 10))
	} else {
		out.WriteString(strconv.FormatUint(u, 10))
	}
	return nil
}

// bin writes n bytes as base64, as encoding/json shows a []byte.
func (d *msgDecoder) bin(out *bytes.Buffer, n, start int) error {
	raw, err := d.take(n, start, "a binary")
	if err != nil {
		return err
	}
	writeJSONString(out, base64.StdEncoding.EncodeToString(raw))
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
