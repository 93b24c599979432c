package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// edited returns b with n of its bytes changed, some bytes inserted and some
// removed, at random places: what a profile's save does to its encoding.
func edited(rng *rand.Rand, b []byte, n int) []byte {
	out := bytes.Clone(b)
	for range n {
		if len(out) == 0 {
			out = append(out, byte(rng.Uint32()))
			continue
		}
		i := rng.IntN(len(out))
		switch rng.IntN(4) {
		case 0:
			out = append(out[:i], append([]byte{byte(rng.Uint32()), byte(rng.Uint32())}, out[i:]...)...)
		case 1:
			out = append(out[:i], out[min(i+3, len(out)):]...)
		default:
			out[i] = byte(rng.Uint32())
		}
	}
	return out
}

// A delta applied to its base gives back the version it was made of, and
// the small edits of a profile make a small delta.
func TestDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	base := make([]byte, 1024)
	for i := range base {
		base[i] = byte(rng.IntN(40)) // some repetition, as an encoding has
	}
	tests := []struct {
		name         string
		target       []byte
		base         []byte
		maxDeltaSize int
	}{
		{"equal", bytes.Clone(base), base, 12},
		{"a few edits", edited(rng, base, 5), base, 60},
		{"many edits", edited(rng, base, 100), base, 1024},
		{"empty target", nil, base, 8},
		{"empty base", edited(rng, nil, 30), nil, 60},
		{"unrelated", edited(rng, make([]byte, 300), 300), base, 400},
		{"short", []byte("abc"), []byte("abd"), 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := appendDelta(nil, tc.base, tc.target)
			got, err := applyDelta(nil, tc.base, d, MaxKeptBytes)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if !bytes.Equal(got, tc.target) {
				t.Fatalf("apply gave %d bytes that differ from the %d of the target", len(got), len(tc.target))
			}
			if len(d) > tc.maxDeltaSize {
				t.Errorf("delta of %d bytes, want at most %d", len(d), tc.maxDeltaSize)
			}
		})
	}
}

// A delta that is damaged, or applied to another base, is refused: it never
// reads as data.
func TestDeltaRefusesDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	base := make([]byte, 512)
	for i := range base {
		base[i] = byte(rng.Uint32())
	}
	target := edited(rng, base, 4)
	d := appendDelta(nil, base, target)
	for i := range d {
		for _, bit := range []byte{1, 0x80} {
			bad := bytes.Clone(d)
			bad[i] ^= bit
			if got, err := applyDelta(nil, base, bad, MaxKeptBytes); err == nil {
				t.Fatalf("byte %d flipped (%#x): applied to %d bytes without an error", i, bit, len(got))
			} else if !errors.Is(err, ErrBadDelta) {
				t.Fatalf("byte %d flipped: %v, want ErrBadDelta", i, err)
			}
		}
	}
	if _, err := applyDelta(nil, edited(rng, base, 1), d, MaxKeptBytes); !errors.Is(err, ErrBadDelta) {
		t.Fatalf("applied to another base: %v, want ErrBadDelta", err)
	}
	if _, err := applyDelta(nil, base, d[:len(d)-1], MaxKeptBytes); !errors.Is(err, ErrBadDelta) {
		t.Fatalf("truncated: %v, want ErrBadDelta", err)
	}
	if _, err := applyDelta(nil, base, d, len(target)-1); !errors.Is(err, ErrBadDelta) {
		t.Fatalf("over the limit: %v, want ErrBadDelta", err)
	}
}

// FuzzApplyDelta: any bytes as a delta against any base give an error or
// bytes, never a panic; and a delta made of two inputs gives the target.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("the base of it all"), []byte("the bass of it all!"))
	f.Add([]byte{}, []byte{1, 2, 3})
	f.Add(bytes.Repeat([]byte("ab"), 100), binary.AppendUvarint(nil, 1<<40))
	f.Fuzz(func(t *testing.T, base, other []byte) {
		if got, err := applyDelta(nil, base, other, 1<<20); err == nil && len(got) > 1<<20 {
			t.Fatalf("%d bytes past the limit", len(got))
		}
		d := appendDelta(nil, base, other)
		got, err := applyDelta(nil, base, d, MaxKeptBytes)
		if err != nil || !bytes.Equal(got, other) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
