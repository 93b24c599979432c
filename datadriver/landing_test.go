package datadriver

import (
	"testing"
	"time"
	"unsafe"
)

// TestALandingKeepsItsFlagsApartFromItsCount: a landed write as a profile
// keeps it (24 bytes, its flags in the count's top bits) reads back as the
// Saved it was made from, whatever the flags, up to the largest count it
// holds.
func TestALandingKeepsItsFlagsApartFromItsCount(t *testing.T) {
	if n := unsafe.Sizeof(landing{}); n > 24 {
		t.Fatalf("a landing takes %d bytes; want at most 24", n)
	}
	at := time.UnixMilli(1_765_000_000_123)
	for _, updates := range []uint64{0, 1, 1 << 40, landedUpdates} {
		for _, flags := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			l := newLanding(7, wallNS(at), updates, flags[0], flags[1])
			got := l.saved("k")
			want := Saved{Key: "k", Ver: 7, At: at, Updates: updates, Replicated: flags[0], Released: flags[1]}
			if got.Key != want.Key || got.Ver != want.Ver || !got.At.Equal(want.At) || got.Updates != want.Updates ||
				got.Replicated != want.Replicated || got.Released != want.Released {
				t.Fatalf("updates %d, flags %v: read back %+v, want %+v", updates, flags, got, want)
			}
		}
	}
	// A count past what it holds (never reached) is held as the largest,
	// never as a flag.
	if s := newLanding(1, 0, ^uint64(0), false, false).saved("k"); s.Replicated || s.Released || s.Updates != landedUpdates {
		t.Fatalf("a count past 2^62 read back as %+v", s)
	}
}
