package datadriver

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Whether a write sends the data is decided by the digest alone: data that
// differs from the stored data in any one bit, or in its length, is never
// taken for it; the stored data itself always is; and another driver's
// digests (other seeds) are not this one's.
func TestTheStoredDigestTellsEveryChange(t *testing.T) {
	g := newDigester()
	data := make([]byte, 512)
	rand.NewChaCha8([32]byte{7}).Read(data)
	s := g.storedOf(data)
	if !g.same(s, bytes.Clone(data)) {
		t.Fatal("the stored data is not the same as itself")
	}
	for i := range len(data) * 8 {
		changed := bytes.Clone(data)
		changed[i/8] ^= 1 << (i % 8)
		if g.same(s, changed) {
			t.Fatalf("data with bit %d flipped taken for the stored data", i)
		}
	}
	if g.same(s, data[:511]) || g.same(s, append(bytes.Clone(data), 0)) {
		t.Fatal("data of another length taken for the stored data")
	}
	if empty := g.storedOf(nil); !g.same(empty, nil) || g.same(empty, []byte{0}) {
		t.Fatal("no stored data: an empty encoding is the same, one byte is not")
	}
	if other := newDigester(); other.digest(data) == g.digest(data) {
		t.Fatal("two drivers digest alike: their seeds are not their own")
	}
}
