package lockrule

import (
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// The rule of a proof: two stopped readings at least a beat apart, nothing
// else between; an unknown reading (for any reason) or an alive one breaks
// it; a proof covers the locks written before its proving read was sent.
func TestStopRule(t *testing.T) {
	const beat = time.Second
	t0 := time.Unix(1000, 0)
	stopped := presencecore.Reading{Status: presencecore.Stopped}
	alive := presencecore.Reading{Status: presencecore.Alive, ExpiresIn: time.Second}
	grace := presencecore.Reading{Status: presencecore.Unknown, ExpiresIn: 4 * time.Second}
	failed := presencecore.Reading{Status: presencecore.Unknown, Err: errors.New("read failed")}
	type read struct {
		r   presencecore.Reading
		at  time.Duration // answered at t0+at, sent 10 ms before
		new bool          // this read completes a proof
	}
	for _, tc := range []struct {
		name   string
		reads  []read
		proven bool
	}{
		{"one stopped read", []read{{stopped, 0, false}}, false},
		{"two stopped reads under a beat apart", []read{{stopped, 0, false}, {stopped, beat - time.Millisecond, false}}, false},
		{"two stopped reads a beat apart", []read{{stopped, 0, false}, {stopped, beat, true}}, true},
		{"a third proves it again", []read{{stopped, 0, false}, {stopped, beat, true}, {stopped, 2 * beat, false}}, true},
		{"unknown after a restart between", []read{{stopped, 0, false}, {grace, beat / 2, false}, {stopped, beat, false}}, false},
		{"a failed read between", []read{{stopped, 0, false}, {failed, beat / 2, false}, {stopped, beat, false}}, false},
		{"alive between", []read{{stopped, 0, false}, {alive, beat / 2, false}, {stopped, beat, false}}, false},
		{"unknown breaks a standing proof", []read{{stopped, 0, false}, {stopped, beat, true}, {grace, 2 * beat, false}}, false},
		{"unknown only", []read{{grace, 0, false}, {grace, 2 * beat, false}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Stop
			for i, rd := range tc.reads {
				answered := t0.Add(rd.at)
				if got := s.Fold(rd.r, answered.Add(-10*time.Millisecond), answered, beat); got != rd.new {
					t.Fatalf("read %d: newly proven %v, want %v", i, got, rd.new)
				}
			}
			if _, ok := s.Proven(); ok != tc.proven {
				t.Fatalf("proven %v, want %v", ok, tc.proven)
			}
		})
	}
	var s Stop
	s.Fold(stopped, t0, t0, beat)
	if at := s.ProvesAt(beat); !at.Equal(t0.Add(beat)) {
		t.Fatalf("ProvesAt %v, want %v", at, t0.Add(beat))
	}
	sent := t0.Add(beat)
	s.Fold(stopped, sent, sent.Add(time.Millisecond), beat)
	if !s.Covers(sent.Add(-time.Millisecond)) || s.Covers(sent) || s.Covers(sent.Add(time.Second)) {
		t.Fatal("a proof covers exactly the locks written before its proving read was sent")
	}
}
