package datacodec

import (
	"bytes"
	"cmp"
	"math"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file holds the msgpack wire format as the codec writes it: appending
// values the way msgpack v5's Encoder writes them (so a value without maps
// encodes to the bytes msgpack.Marshal gives), and the canonical order of
// map keys. Reading is internal/msgpackwire's.

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
	r := msgpackwire.Reader{B: k, Off: 1}
	switch {
	case c == msgpcode.Nil:
		return keyView{class: classNil}
	case c == msgpcode.False || c == msgpcode.True:
		return keyView{class: classBool, u: uint64(c - msgpcode.False)}
	case c == msgpcode.Float || c == msgpcode.Double:
		f, _ := r.Float(c, "")
		return keyView{class: classFloat, f: f}
	case msgpackwire.IsStr(c) || msgpackwire.IsBin(c):
		p, _, err := r.Str(c, "")
		if err == nil {
			if msgpackwire.IsStr(c) {
				return keyView{class: classStr, p: p}
			}
			return keyView{class: classBin, p: p}
		}
	default:
		if u, neg, err := r.Integer(c, ""); err == nil {
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
