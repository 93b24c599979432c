// Package checksum is the checksum of the stored structures a Lua script
// writes from what its caller sends: a script cannot compute a CRC, so the
// caller, who knows every byte, computes it and the script stores it
// beside them (a record's sum, an inbox entry's c, a dead letter's d, a
// trade journal entry's c). Whoever reads the structure computes it again.
package checksum

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
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
	var n [binary.MaxVarintLen64]byte
	c := uint32(r)
	for _, b := range parts {
		c = crc32.Update(c, table, n[:binary.PutUvarint(n[:], uint64(len(b)))])
		c = crc32.Update(c, table, b)
	}
	return Running(c)
}

// String is the checksum of the parts r has run over, as Of gives it.
func (r Running) String() string { return fmt.Sprintf("%08x", uint32(r)) }

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
