package checksum_test

import (
	"bytes"
	"strconv"
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

// A checksum run part by part (Running) is the checksum of the same parts
// at once, whichever way the parts are split between Then, Part and Int
// (the record's data is run once and kept; its schema numbers later), and
// it allocates nothing but the string.
func TestRunningIsOf(t *testing.T) {
	data := bytes.Repeat([]byte("profile "), 200)
	for _, tc := range []struct{ schema, min int64 }{{0, 0}, {3, 1}, {-1, 12345678901}} {
		s, m := strconv.FormatInt(tc.schema, 10), strconv.FormatInt(tc.min, 10)
		want := checksum.Of(data, []byte(s), []byte(m), []byte("uids"), nil)
		got := checksum.Running(0).Part(data).Int(tc.schema).Int(tc.min).Part([]byte("uids")).Part(nil).String()
		if got != want {
			t.Fatalf("schema %d/%d: run part by part %s, at once %s", tc.schema, tc.min, got, want)
		}
		if then := checksum.Running(0).Then(data, []byte(s)).Then([]byte(m), []byte("uids"), nil).String(); then != want {
			t.Fatalf("schema %d/%d: Then %s, Of %s", tc.schema, tc.min, then, want)
		}
	}
	r := checksum.Running(0).Part(data)
	if n := testing.AllocsPerRun(100, func() { r = r.Int(7).Part(data) }); n != 0 {
		t.Fatalf("Part and Int allocate %.0f times", n)
	}
}
