package checksum_test

import (
	"testing"

	"github.com/ckernel/playerdata/internal/checksum"
)

// Of is CRC-32C of length-prefixed parts: bytes moved from one part to the
// next change it, and it has the form Valid accepts.
func TestOf(t *testing.T) {
	a := checksum.Of([]byte("ab"), []byte("c"))
	if b := checksum.Of([]byte("a"), []byte("bc")); a == b {
		t.Fatalf("a byte moved between parts keeps the checksum %s", a)
	}
	if a != checksum.Of([]byte("ab"), []byte("c")) || !checksum.Valid(a) {
		t.Fatalf("Of = %q: not stable, or not 8 hex digits", a)
	}
	// The stored checksums' format: CRC-32C (whose check value, of
	// "123456789" alone, is e3069283) of the length prefix 0x09, then
	// "123456789". Changing it makes every stored checksum fail.
	if got := checksum.Of([]byte("123456789")); got != "36b29ae0" {
		t.Fatalf("Of(\"123456789\") = %q, want 36b29ae0", got)
	}
	for _, s := range []string{"", "0000000", "000000000", "0000000g", "ABCDEF01"} {
		if checksum.Valid(s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}
