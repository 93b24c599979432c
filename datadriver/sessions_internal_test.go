package datadriver

import "testing"

// TestBeatSessionsNeverWaits: the count the presence beat takes never waits
// for a busy Node or driver lock (invariant 14): it answers the count last
// taken, and the next call after the lock is free counts again. Profiles
// held, leaving and adopting count, and keys loading; retained and ended
// profiles do not.
func TestBeatSessionsNeverWaits(t *testing.T) {
	d := &Driver[int]{profiles: map[string]*Profile[int]{}, loading: map[string]bool{}}
	for key, ph := range map[string]phase{"live": phaseLive, "leaving": phaseLeaving, "adopting": phaseAdopting,
		"retained": phaseRetained, "ended": phaseEnded} {
		p := &Profile[int]{}
		p.life.Store(&lifeView{phase: ph})
		if ph == phaseEnded {
			p.ended.Store(&ending{cause: causeReleased})
		}
		d.profiles[key] = p
	}
	d.loading["new"] = true
	n := &Node{drivers: map[string]driverHandle{"D": d}}

	if got := n.beatSessions(); got != 4 {
		t.Fatalf("beatSessions = %d, want 4 (3 held, 1 loading)", got)
	}
	d.mu.Lock()
	d.loading["other"] = true
	if got := n.beatSessions(); got != 4 {
		t.Errorf("with the driver's lock held: %d, want the last count 4", got)
	}
	d.mu.Unlock()
	n.mu.Lock()
	if got := n.beatSessions(); got != 4 {
		t.Errorf("with the Node's lock held: %d, want the last count 4", got)
	}
	n.mu.Unlock()
	if got := n.beatSessions(); got != 5 {
		t.Errorf("locks free again: %d, want 5", got)
	}
	if got := n.Sessions(); got != 5 {
		t.Errorf("Sessions = %d, want 5", got)
	}
}
