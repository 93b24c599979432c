// Package checksum is the checksum of the stored structures a Lua script
// writes from what its caller sends: a script cannot compute a CRC, so the
// caller, who knows every byte, computes it and the script stores it
// beside them (a record's sum, an inbox entry's c, a dead letter's d, a
// trade journal entry's c). Whoever reads the structure computes it again.
package checksum

import (
	"encoding/binary"
	"hash/crc32"
	"strconv"
)

// table is CRC-32C (Castagnoli), which has hardware support on amd64 and
// arm64 and detects every error of up to 32 bits in a row.
var table = crc32.MakeTable(crc32.Castagnoli)

// Of is the CRC-32C of parts, each prefixed with its length (so that bytes
// moved from one part to the next change it), as 8 lowercase hex digits.
func Of(parts ...[]byte) string { return Running(0).Then(parts...).String() }

// Running is a checksum part way through its parts: Of(a, b, c) is
// Running(0).Then(a).Then(b, c).String(). Whoever checksums the same first
// part again and again (a record's data, beside metadata that changes)
// keeps its Running instead of the part.
type Running uint32

// Then is r followed by parts.
func (r Running) Then(parts ...[]byte) Running {
	for _, b := range parts {
		r = r.Part(b)
	}
	return r
}

// Part is r followed by one part. It allocates nothing: the length prefix
// runs through the table byte by byte (a slice of a local array handed to
// crc32.Update would escape to the heap), the part itself through
// crc32.Update (the hardware's CRC-32C).
func (r Running) Part(b []byte) Running {
	var n [binary.MaxVarintLen64]byte
	return Running(crc32.Update(r.small(n[:binary.PutUvarint(n[:], uint64(len(b)))]), table, b))
}

// Int is r followed by one part, the decimal digits of v (as
// strconv.Itoa writes them), without allocating.
func (r Running) Int(v int64) Running {
	var d [20]byte
	digits := strconv.AppendInt(d[:0], v, 10)
	var n [binary.MaxVarintLen64]byte
	return Running(Running(r.small(n[:binary.PutUvarint(n[:], uint64(len(digits)))])).small(digits))
}

// small runs the CRC over a few bytes with the table, byte by byte: the
// same CRC as crc32.Update, without handing it the slice.
func (r Running) small(p []byte) uint32 {
	c := ^uint32(r)
	for _, v := range p {
		c = table[byte(c)^v] ^ (c >> 8)
	}
	return ^c
}

// String is the checksum of the parts r has run over, as Of gives it.
func (r Running) String() string {
	const digits = "0123456789abcdef"
	var s [8]byte
	for i := 7; i >= 0; i-- {
		s[i] = digits[r&0xf]
		r >>= 4
	}
	return string(s[:])
}

// Valid reports whether s has the form Of gives.
func Valid(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
