// Package damage makes the edits of the stored-bytes attack (issue 32) on
// one stored value: what a bad disk, a buggy tool or a hand edit does. The
// tests of every stored structure use it, each asserting that an edited
// value is refused or reads back as written.
package damage

import (
	"slices"
	"strconv"
)

// masks are the flips of one byte: each bit, then all of them.
var masks = [...]byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff}

// Every calls f with each edit of v, and says what it is: every byte
// flipped (each bit, then all eight), v cut short at every byte, and v
// extended by one byte. f must not keep the slice.
func Every(v []byte, f func(edited []byte, what string)) {
	b := make([]byte, len(v)+1)
	for i := range v {
		for _, m := range masks {
			copy(b, v)
			b[i] ^= m
			f(b[:len(v)], "byte "+strconv.Itoa(i)+" flipped ("+strconv.Itoa(int(m))+")")
		}
		f(v[:i:i], "cut at byte "+strconv.Itoa(i))
	}
	copy(b, v)
	b[len(v)] = '0'
	f(b, "extended")
}

// Once is v with one edit at byte pos (modulo its length + 1), for a fuzz
// target: op 0 XORs b (at least 1) into it, 1 sets it to b, 2 cuts v
// there, 3 inserts b there. v is not changed.
func Once(v []byte, op uint8, pos int, b byte) []byte {
	out := slices.Clone(v)
	pos %= len(out) + 1
	switch op % 4 {
	case 0:
		if pos < len(out) {
			out[pos] ^= max(b, 1)
		}
	case 1:
		if pos < len(out) {
			out[pos] = b
		}
	case 2:
		out = out[:pos]
	default:
		out = slices.Insert(out, pos, b)
	}
	return out
}
