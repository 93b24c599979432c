package datadriver

import "testing"

// TestEveryCauseHasItsRow: each cause has a row of its own in the table (a
// Kick or a log word, never the "none" of a missing row), each lost lock is
// told to the game with a Kick, and the words are unique, so a log line
// names one cause.
func TestEveryCauseHasItsRow(t *testing.T) {
	seen := map[string]cause{}
	for c := causeNone + 1; c <= causeMoved; c++ {
		i := c.info()
		if c.String() == "none" {
			t.Errorf("cause %d has no row in the table", c)
		}
		if i.lost && i.kick == 0 {
			t.Errorf("cause %s loses the lock but the game hears no Kick", c)
		}
		if other, ok := seen[c.String()]; ok && c.kick() != other.kick() {
			t.Errorf("causes %d and %d share the log word %q", c, other, c.String())
		}
		seen[c.String()] = c
	}
}
