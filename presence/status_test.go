package presence

import (
	"testing"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// TestSameAsTheCore: the public constants are the core's, which the
// conversions between the two rely on.
func TestSameAsTheCore(t *testing.T) {
	if DefaultBeat != presencecore.DefaultBeat || DefaultTTL != presencecore.DefaultTTL {
		t.Errorf("DefaultBeat, DefaultTTL = %v, %v; the core's are %v, %v",
			DefaultBeat, DefaultTTL, presencecore.DefaultBeat, presencecore.DefaultTTL)
	}
	for s, c := range map[Status]presencecore.Status{Unknown: presencecore.Unknown, Alive: presencecore.Alive, Stopped: presencecore.Stopped} {
		if int(s) != int(c) {
			t.Errorf("%v is %d here, %d in the core", s, int(s), int(c))
		}
	}
}
