package simulation

import (
	"testing"
	"time"
)

// TestLastOther pins down what "after" means for invariant 9 when things
// happen at one virtual instant.
func TestLastOther(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name  string
		ls    []landing
		asked uint64
		done  time.Time // zero: a trade (accepted before it returned)
		want  string    // the job of the acquisition that breaks it ("": none)
	}{
		{name: "no acquisition", asked: 5, done: at(10)},
		{name: "only its own", ls: []landing{{"a", at(0), 1}}, asked: 5, done: at(10)},
		{name: "another's, at an earlier instant", ls: []landing{{"a", at(0), 1}, {"b", at(5), 3}}, asked: 5, done: at(10), want: "b"},
		{name: "another's, seen before the Update was asked, same instant",
			ls: []landing{{"a", at(0), 1}, {"b", at(10), 3}}, asked: 5, done: at(10), want: "b"},
		{name: "another's, seen after the Update was asked, same instant (its check may have come first)",
			ls: []landing{{"a", at(0), 1}, {"b", at(10), 6}}, asked: 5, done: at(10)},
		{name: "another's, after the Update returned", ls: []landing{{"a", at(0), 1}, {"b", at(11), 6}}, asked: 5, done: at(10)},
		{name: "another's, then its own again", ls: []landing{{"a", at(0), 1}, {"b", at(2), 2}, {"a", at(4), 3}}, asked: 5, done: at(10)},
		{name: "its own again, then another's", ls: []landing{{"b", at(2), 2}, {"a", at(4), 3}, {"b", at(6), 4}}, asked: 5, done: at(10), want: "b"},
		{name: "another's while the Update waited (asked before, at an earlier instant than its return)",
			ls: []landing{{"a", at(0), 1}, {"b", at(7), 6}}, asked: 5, done: at(10), want: "b"},
		{name: "a trade asked before another's acquire landed", ls: []landing{{"a", at(0), 1}, {"b", at(7), 6}}, asked: 5},
		{name: "a trade asked after another's acquire landed", ls: []landing{{"a", at(0), 1}, {"b", at(7), 4}}, asked: 5, want: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if l := lastOther(tt.ls, "a", tt.asked, tt.done); l != nil {
				got = l.job
			}
			if got != tt.want {
				t.Fatalf("lastOther = %q, want %q", got, tt.want)
			}
		})
	}
}
