package datacodec

import (
	"bytes"
	"cmp"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file holds the msgpack wire format: appending values the way msgpack
// v5's Encoder writes them (so a value without maps encodes to the bytes
// msgpack.Marshal gives), reading them off a byte slice, skipping one, and
// the canonical order of map keys.

func appendNil(b []byte) []byte { return append(b, msgpcode.Nil) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, msgpcode.True)
	}
	return append(b, msgpcode.False)
}

func append1(b []byte, c byte, n uint8) []byte { return append(b, c, n) }

func append2(b []byte, c byte, n uint16) []byte { return append(b, c, byte(n>>8), byte(n)) }

func append4(b []byte, c byte, n uint32) []byte {
	return append(b, c, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func append8(b []byte, c byte, n uint64) []byte {
	return append(b, c, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// appendUint is msgpack's EncodeUint: the smallest form.
func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append1(b, msgpcode.Uint8, uint8(n))
	case n <= math.MaxUint16:
		return append2(b, msgpcode.Uint16, uint16(n))
	case n <= math.MaxUint32:
		return append4(b, msgpcode.Uint32, uint32(n))
	}
	return append8(b, msgpcode.Uint64, n)
}

// appendInt is msgpack's EncodeInt: the smallest form.
func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= int64(int8(msgpcode.NegFixedNumLow)):
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append1(b, msgpcode.Int8, uint8(n))
	case n >= math.MinInt16:
		return append2(b, msgpcode.Int16, uint16(n))
	case n >= math.MinInt32:
		return append4(b, msgpcode.Int32, uint32(n))
	}
	return append8(b, msgpcode.Int64, uint64(n))
}

func appendStringLen(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, msgpcode.FixedStrLow|byte(n))
	case n < 256:
		return append1(b, msgpcode.Str8, uint8(n))
	case n <= math.MaxUint16:
		return append2(b, msgpcode.Str16, uint16(n))
	}
	return append4(b, msgpcode.Str32, uint32(n))
}

func appendString(b []byte, s string) []byte { return append(appendStringLen(b, len(s)), s...) }

func appendBinLen(b []byte, n int) []byte {
	switch {
	case n < 256:
		return append1(b, msgpcode.Bin8, uint8(n))
	case n <= math.MaxUint16:
		return append2(b, msgpcode.Bin16, uint16(n))
	}
	return append4(b, msgpcode.Bin32, uint32(n))
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return append2(b, msgpcode.Array16, uint16(n))
	}
	return append4(b, msgpcode.Array32, uint32(n))
}

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, msgpcode.FixedMapLow|byte(n))
	case n <= math.MaxUint16:
		return append2(b, msgpcode.Map16, uint16(n))
	}
	return append4(b, msgpcode.Map32, uint32(n))
}

// reader reads msgpack values off a byte slice. Its errors wrap
// ErrMalformed (the bytes are not msgpack) or ErrTypeMismatch (valid
// msgpack of another type than the one asked for).
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) code() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errTruncated
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, errTruncated
	}
	return r.b[r.off], nil
}

func (r *reader) next(n int) ([]byte, error) {
	if n < 0 || n > r.left() {
		return nil, errTruncated
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p, nil
}

func (r *reader) u8() (uint64, error) {
	p, err := r.next(1)
	if err != nil {
		return 0, err
	}
	return uint64(p[0]), nil
}

func (r *reader) u16() (uint64, error) {
	p, err := r.next(2)
	if err != nil {
		return 0, err
	}
	return uint64(p[0])<<8 | uint64(p[1]), nil
}

func (r *reader) u32() (uint64, error) {
	p, err := r.next(4)
	if err != nil {
		return 0, err
	}
	return uint64(p[0])<<24 | uint64(p[1])<<16 | uint64(p[2])<<8 | uint64(p[3]), nil
}

func (r *reader) u64() (uint64, error) {
	p, err := r.next(8)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range p {
		n = n<<8 | uint64(c)
	}
	return n, nil
}

// length reads the length that follows code c of a str, bin, array, map
// or ext header; ok is false when c is none of these.
func (r *reader) length(c byte) (n int, ok bool, err error) {
	var u uint64
	switch {
	case c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh:
		return int(c & msgpcode.FixedStrMask), true, nil
	case c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh:
		return int(c & msgpcode.FixedArrayMask), true, nil
	case c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh:
		return int(c & msgpcode.FixedMapMask), true, nil
	}
	switch c {
	case msgpcode.Str8, msgpcode.Bin8, msgpcode.Ext8:
		u, err = r.u8()
	case msgpcode.Str16, msgpcode.Bin16, msgpcode.Array16, msgpcode.Map16, msgpcode.Ext16:
		u, err = r.u16()
	case msgpcode.Str32, msgpcode.Bin32, msgpcode.Array32, msgpcode.Map32, msgpcode.Ext32:
		u, err = r.u32()
	case msgpcode.FixExt1:
		return 1, true, nil
	case msgpcode.FixExt2:
		return 2, true, nil
	case msgpcode.FixExt4:
		return 4, true, nil
	case msgpcode.FixExt8:
		return 8, true, nil
	case msgpcode.FixExt16:
		return 16, true, nil
	default:
		return 0, false, nil
	}
	return int(u), true, err
}

// mapLen reads a map header (-1 for nil). Each entry takes at least two
// bytes, so a count the input cannot hold is refused before anything is
// allocated for it.
func (r *reader) mapLen(c byte) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if !isMap(c) {
		return 0, mismatch(c, "map")
	}
	n, _, err := r.length(c)
	if err == nil && n > r.left()/2 {
		err = errTruncated
	}
	return n, err
}

// arrayLen reads an array header (-1 for nil); see mapLen.
func (r *reader) arrayLen(c byte) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if !isArray(c) {
		return 0, mismatch(c, "array")
	}
	n, _, err := r.length(c)
	if err == nil && n > r.left() {
		err = errTruncated
	}
	return n, err
}

// str reads a str or bin payload (as msgpack's DecodeString and
// DecodeBytes do, each accepts both); isNil reports a nil.
func (r *reader) str(c byte, want string) (p []byte, isNil bool, err error) {
	if c == msgpcode.Nil {
		return nil, true, nil
	}
	if !isStr(c) && !isBin(c) {
		return nil, false, mismatch(c, want)
	}
	n, _, err := r.length(c)
	if err != nil {
		return nil, false, err
	}
	p, err = r.next(n)
	return p, false, err
}

// integer reads any msgpack integer (nil reads as 0): neg reports a
// negative value, whose two's complement is u.
func (r *reader) integer(c byte, want string) (u uint64, neg bool, err error) {
	switch {
	case c == msgpcode.Nil:
		return 0, false, nil
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), false, nil
	case c >= msgpcode.NegFixedNumLow:
		return uint64(int64(int8(c))), true, nil
	}
	switch c {
	case msgpcode.Uint8:
		u, err = r.u8()
	case msgpcode.Uint16:
		u, err = r.u16()
	case msgpcode.Uint32:
		u, err = r.u32()
	case msgpcode.Uint64:
		u, err = r.u64()
	case msgpcode.Int8:
		u, err = r.u8()
		u = uint64(int64(int8(u)))
	case msgpcode.Int16:
		u, err = r.u16()
		u = uint64(int64(int16(u)))
	case msgpcode.Int32:
		u, err = r.u32()
		u = uint64(int64(int32(u)))
	case msgpcode.Int64:
		u, err = r.u64()
	default:
		return 0, false, mismatch(c, want)
	}
	return u, c >= msgpcode.Int8 && int64(u) < 0, err
}

// float reads a float32, float64 or integer as a float64.
func (r *reader) float(c byte, want string) (float64, error) {
	switch c {
	case msgpcode.Float:
		u, err := r.u32()
		return float64(math.Float32frombits(uint32(u))), err
	case msgpcode.Double:
		u, err := r.u64()
		return math.Float64frombits(u), err
	}
	u, neg, err := r.integer(c, want)
	if neg {
		return float64(int64(u)), err
	}
	return float64(u), err
}

// skip passes over one value, without recursion: pending counts the values
// still to pass. hasMaps reports a map of two or more entries inside (its
// keys may need sorting).
func (r *reader) skip() (hasMaps bool, err error) {
	for pending := 1; pending > 0; pending-- {
		c, err := r.code()
		if err != nil {
			return false, err
		}
		if c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow {
			continue
		}
		switch c {
		case msgpcode.Nil, msgpcode.False, msgpcode.True:
			continue
		case msgpcode.Uint8, msgpcode.Int8:
			_, err = r.next(1)
		case msgpcode.Uint16, msgpcode.Int16:
			_, err = r.next(2)
		case msgpcode.Uint32, msgpcode.Int32, msgpcode.Float:
			_, err = r.next(4)
		case msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
			_, err = r.next(8)
		default:
			n, ok, lerr := r.length(c)
			switch {
			case lerr != nil:
				err = lerr
			case !ok:
				err = fmt.Errorf("%w: invalid code 0x%02x", ErrMalformed, c)
			case isArray(c):
				pending += n
			case isMap(c):
				pending += 2 * n
				hasMaps = hasMaps || n > 1
			case isExt(c):
				_, err = r.next(n + 1)
			default:
				_, err = r.next(n)
			}
		}
		if err != nil {
			return false, err
		}
		if pending-1 > r.left() {
			return false, errTruncated // each pending value takes a byte at least
		}
	}
	return hasMaps, nil
}

func isMap(c byte) bool {
	return c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArray(c byte) bool {
	return c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isStr(c byte) bool {
	return c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

func isBin(c byte) bool { return c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 }

func isExt(c byte) bool {
	return c >= msgpcode.FixExt1 && c <= msgpcode.FixExt16 || c == msgpcode.Ext8 || c == msgpcode.Ext16 || c == msgpcode.Ext32
}

// describe names the msgpack type of code c, for errors.
func describe(c byte) string {
	switch {
	case c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow:
		return "int"
	case isMap(c):
		return "map"
	case isArray(c):
		return "array"
	case isStr(c):
		return "str"
	case isBin(c):
		return "bin"
	case isExt(c):
		return "ext"
	}
	switch c {
	case msgpcode.Nil:
		return "nil"
	case msgpcode.False, msgpcode.True:
		return "bool"
	case msgpcode.Float, msgpcode.Double:
		return "float"
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return "int"
	}
	return fmt.Sprintf("invalid code 0x%02x", c)
}

// Canonical key order, shared by typed maps and by maps inside unknown
// fields, so that an older server that holds a newer server's map as raw
// bytes sorts it the same way: nil, false, true, integers by value, floats
// by value, strings and then bins by their bytes, anything else by its
// encoding.
const (
	classNil = iota
	classBool
	classInt
	classFloat
	classStr
	classBin
	classOther
)

type keyView struct {
	class int
	neg   bool
	u     uint64
	f     float64
	p     []byte
}

func viewKey(k []byte) keyView {
	if len(k) == 0 {
		return keyView{class: classOther}
	}
	c := k[0]
	r := reader{b: k, off: 1}
	switch {
	case c == msgpcode.Nil:
		return keyView{class: classNil}
	case c == msgpcode.False || c == msgpcode.True:
		return keyView{class: classBool, u: uint64(c - msgpcode.False)}
	case c == msgpcode.Float || c == msgpcode.Double:
		f, _ := r.float(c, "")
		return keyView{class: classFloat, f: f}
	case isStr(c) || isBin(c):
		p, _, err := r.str(c, "")
		if err == nil {
			if isStr(c) {
				return keyView{class: classStr, p: p}
			}
			return keyView{class: classBin, p: p}
		}
	default:
		if u, neg, err := r.integer(c, ""); err == nil {
			return keyView{class: classInt, neg: neg, u: u}
		}
	}
	return keyView{class: classOther, p: k}
}

// compareKeys orders two encoded map keys canonically.
func compareKeys(a, b []byte) int {
	// Fast path: two fixstr keys, the usual case.
	if len(a) > 0 && len(b) > 0 && a[0]&0xe0 == msgpcode.FixedStrLow && b[0]&0xe0 == msgpcode.FixedStrLow {
		return bytes.Compare(a[1:], b[1:])
	}
	x, y := viewKey(a), viewKey(b)
	if x.class != y.class {
		return cmp.Compare(x.class, y.class)
	}
	switch x.class {
	case classBool:
		return cmp.Compare(x.u, y.u)
	case classInt:
		if x.neg != y.neg {
			if x.neg {
				return -1
			}
			return 1
		}
		if x.neg {
			return cmp.Compare(int64(x.u), int64(y.u))
		}
		return cmp.Compare(x.u, y.u)
	case classFloat:
		return cmp.Compare(x.f, y.f)
	}
	return bytes.Compare(x.p, y.p)
}
