// Package msgpackwire reads msgpack off a byte slice: one value at a time,
// without copying and without allocating, refusing any length the input
// cannot hold before acting on it, so hostile bytes cost nothing. It is the
// one msgpack reader of the project: the profile codec (internal/datacodec),
// the bus's wire messages (messaging) and the program's data view
// (cmd/playerdata) read through it, each turning its errors into its own.
package msgpackwire

import (
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrTruncated: the input ends inside a value, or a length claims more
// bytes than are left.
var ErrTruncated = errors.New("unexpected end of input")

// CodeError is a byte that begins no msgpack value (0xc1, the one code
// msgpack never uses).
type CodeError struct{ Code byte }

// Error names the code.
func (e *CodeError) Error() string { return fmt.Sprintf("invalid code 0x%02x", e.Code) }

// TypeError is valid msgpack of another type than the one asked for.
type TypeError struct {
	Code byte   // the code read
	Want string // what the caller asked for
}

// Error names both types: "msgpack str into int".
func (e *TypeError) Error() string { return "msgpack " + Describe(e.Code) + " into " + e.Want }

// Reader reads msgpack values off B from Off. Its errors are ErrTruncated,
// a *CodeError or a *TypeError.
type Reader struct {
	B   []byte // the input
	Off int    // where the next read starts
}

// Left is the number of bytes not read yet.
func (r *Reader) Left() int { return len(r.B) - r.Off }

// Code reads one byte: the code that begins a value.
func (r *Reader) Code() (byte, error) {
	if r.Off >= len(r.B) {
		return 0, ErrTruncated
	}
	c := r.B[r.Off]
	r.Off++
	return c, nil
}

// Peek returns the next byte without reading it.
func (r *Reader) Peek() (byte, error) {
	if r.Off >= len(r.B) {
		return 0, ErrTruncated
	}
	return r.B[r.Off], nil
}

// Next reads n bytes, as a slice of B that cannot be appended to.
func (r *Reader) Next(n int) ([]byte, error) {
	if n < 0 || n > r.Left() {
		return nil, ErrTruncated
	}
	p := r.B[r.Off : r.Off+n : r.Off+n]
	r.Off += n
	return p, nil
}

// uint reads a big-endian unsigned integer of n bytes.
func (r *Reader) uint(n int) (uint64, error) {
	p, err := r.Next(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, c := range p {
		u = u<<8 | uint64(c)
	}
	return u, nil
}

// Length reads the length that follows code c of a str, bin, array, map
// or ext header (for an ext, the length of its data, which follows its
// type byte); ok is false when c is none of these. The length is not
// checked against what is left.
func (r *Reader) Length(c byte) (n int, ok bool, err error) {
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
		u, err = r.uint(1)
	case msgpcode.Str16, msgpcode.Bin16, msgpcode.Array16, msgpcode.Map16, msgpcode.Ext16:
		u, err = r.uint(2)
	case msgpcode.Str32, msgpcode.Bin32, msgpcode.Array32, msgpcode.Map32, msgpcode.Ext32:
		u, err = r.uint(4)
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

// HeadSize is the number of bytes that follow code c before any payload:
// the width of an integer or a float, or of the length of a str, bin,
// array, map or ext (an ext's type byte not counted); 0 for the codes that
// hold their value or length themselves.
func HeadSize(c byte) int {
	switch c {
	case msgpcode.Uint8, msgpcode.Int8, msgpcode.Str8, msgpcode.Bin8, msgpcode.Ext8:
		return 1
	case msgpcode.Uint16, msgpcode.Int16, msgpcode.Str16, msgpcode.Bin16, msgpcode.Array16, msgpcode.Map16, msgpcode.Ext16:
		return 2
	case msgpcode.Uint32, msgpcode.Int32, msgpcode.Float, msgpcode.Str32, msgpcode.Bin32, msgpcode.Array32, msgpcode.Map32, msgpcode.Ext32:
		return 4
	case msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
		return 8
	}
	return 0
}

// MapLen reads a map header after code c (-1 for nil). Each entry takes at
// least two bytes, so a count the input cannot hold is refused before
// anything is allocated for it.
func (r *Reader) MapLen(c byte) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if !IsMap(c) {
		return 0, &TypeError{Code: c, Want: "map"}
	}
	n, _, err := r.Length(c)
	if err == nil && n > r.Left()/2 {
		err = ErrTruncated
	}
	return n, err
}

// ArrayLen reads an array header after code c (-1 for nil); see MapLen.
func (r *Reader) ArrayLen(c byte) (int, error) {
	if c == msgpcode.Nil {
		return -1, nil
	}
	if !IsArray(c) {
		return 0, &TypeError{Code: c, Want: "array"}
	}
	n, _, err := r.Length(c)
	if err == nil && n > r.Left() {
		err = ErrTruncated
	}
	return n, err
}

// Str reads the payload of a str or bin after code c (as msgpack's
// DecodeString and DecodeBytes do, it accepts both; a caller that wants
// one checks IsStr or IsBin first); isNil reports a nil. want names what
// the caller asked for, in a *TypeError.
func (r *Reader) Str(c byte, want string) (p []byte, isNil bool, err error) {
	if c == msgpcode.Nil {
		return nil, true, nil
	}
	if !IsStr(c) && !IsBin(c) {
		return nil, false, &TypeError{Code: c, Want: want}
	}
	n, _, err := r.Length(c)
	if err != nil {
		return nil, false, err
	}
	p, err = r.Next(n)
	return p, false, err
}

// Integer reads any msgpack integer after code c (nil reads as 0): neg
// reports a negative value, whose two's complement is u.
func (r *Reader) Integer(c byte, want string) (u uint64, neg bool, err error) {
	switch {
	case c == msgpcode.Nil:
		return 0, false, nil
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), false, nil
	case c >= msgpcode.NegFixedNumLow:
		return uint64(int64(int8(c))), true, nil
	}
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64:
		u, err = r.uint(HeadSize(c))
	case msgpcode.Int8:
		u, err = r.uint(1)
		u = uint64(int64(int8(u)))
	case msgpcode.Int16:
		u, err = r.uint(2)
		u = uint64(int64(int16(u)))
	case msgpcode.Int32:
		u, err = r.uint(4)
		u = uint64(int64(int32(u)))
	case msgpcode.Int64:
		u, err = r.uint(8)
	default:
		return 0, false, &TypeError{Code: c, Want: want}
	}
	return u, c >= msgpcode.Int8 && int64(u) < 0, err
}

// Float reads a float32, float64 or integer after code c as a float64.
func (r *Reader) Float(c byte, want string) (float64, error) {
	switch c {
	case msgpcode.Float:
		u, err := r.uint(4)
		return float64(math.Float32frombits(uint32(u))), err
	case msgpcode.Double:
		u, err := r.uint(8)
		return math.Float64frombits(u), err
	}
	u, neg, err := r.Integer(c, want)
	if neg {
		return float64(int64(u)), err
	}
	return float64(u), err
}

// Skip passes over one value, without recursion: pending counts the values
// still to pass. hasMaps reports a map of two or more entries inside (its
// keys may need sorting).
func (r *Reader) Skip() (hasMaps bool, err error) {
	for pending := 1; pending > 0; pending-- {
		c, err := r.Code()
		if err != nil {
			return false, err
		}
		if c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow {
			continue
		}
		switch c {
		case msgpcode.Nil, msgpcode.False, msgpcode.True:
			continue
		case msgpcode.Uint8, msgpcode.Int8, msgpcode.Uint16, msgpcode.Int16,
			msgpcode.Uint32, msgpcode.Int32, msgpcode.Float,
			msgpcode.Uint64, msgpcode.Int64, msgpcode.Double:
			_, err = r.Next(HeadSize(c))
		default:
			n, ok, lerr := r.Length(c)
			switch {
			case lerr != nil:
				err = lerr
			case !ok:
				err = &CodeError{Code: c}
			case IsArray(c):
				pending += n
			case IsMap(c):
				pending += 2 * n
				hasMaps = hasMaps || n > 1
			case IsExt(c):
				_, err = r.Next(n + 1)
			default:
				_, err = r.Next(n)
			}
		}
		if err != nil {
			return false, err
		}
		if pending-1 > r.Left() {
			return false, ErrTruncated // each pending value takes a byte at least
		}
	}
	return hasMaps, nil
}

// IsMap reports whether c begins a map.
func IsMap(c byte) bool {
	return c >= msgpcode.FixedMapLow && c <= msgpcode.FixedMapHigh || c == msgpcode.Map16 || c == msgpcode.Map32
}

// IsArray reports whether c begins an array.
func IsArray(c byte) bool {
	return c >= msgpcode.FixedArrayLow && c <= msgpcode.FixedArrayHigh || c == msgpcode.Array16 || c == msgpcode.Array32
}

// IsStr reports whether c begins a str.
func IsStr(c byte) bool {
	return c >= msgpcode.FixedStrLow && c <= msgpcode.FixedStrHigh || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

// IsBin reports whether c begins a bin.
func IsBin(c byte) bool { return c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 }

// IsExt reports whether c begins an extension.
func IsExt(c byte) bool {
	return c >= msgpcode.FixExt1 && c <= msgpcode.FixExt16 || c == msgpcode.Ext8 || c == msgpcode.Ext16 || c == msgpcode.Ext32
}

// Describe names the msgpack type of code c, for errors.
func Describe(c byte) string {
	switch {
	case c <= msgpcode.PosFixedNumHigh || c >= msgpcode.NegFixedNumLow:
		return "int"
	case IsMap(c):
		return "map"
	case IsArray(c):
		return "array"
	case IsStr(c):
		return "str"
	case IsBin(c):
		return "bin"
	case IsExt(c):
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
