package datadriver

import (
	"math"
	"testing"
)

// A profile's write numbers never wrap: at the last one they stay there, so
// a write is never numbered below one that landed (which Redis would refuse
// as late, every write of the session after it).
func TestWriteNumbersNeverWrap(t *testing.T) {
	w := writer{seq: math.MaxUint32 - 1}
	for range 3 {
		if n := w.nextSeq(); n != math.MaxUint32 {
			t.Fatalf("nextSeq = %d at the end of the count, want %d", n, uint32(math.MaxUint32))
		}
	}
	var fresh writer
	if a, b := fresh.nextSeq(), fresh.nextSeq(); a != 1 || b != 2 {
		t.Fatalf("a fresh profile numbers its writes %d, %d; want 1, 2", a, b)
	}
}
