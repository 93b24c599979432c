package mockclock

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// ticksPerAdd drives a ticker whose receiver makes a timer on every tick,
// as a beat loop does, and returns how many ticks n Adds of one period
// delivered.
func ticksPerAdd(c clock.Clock, add func(time.Duration), n int) int {
	const period = 3 * time.Second
	tk := c.Ticker(period)
	defer tk.Stop()
	got := make(chan time.Time, 4*n)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case tv := <-tk.C:
				t := c.Timer(period)
				t.Stop()
				got <- tv
			}
		}
	}()
	for range n {
		add(period)
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(done)
	return len(got)
}

func TestOneTickPerPeriod(t *testing.T) {
	const adds = 8
	for round := range 100 {
		m := New()
		if n := ticksPerAdd(m, m.Add, adds); n != adds {
			t.Fatalf("round %d: %d ticks for %d periods", round, n, adds)
		}
	}
}

func TestSleepWakesOnAdd(t *testing.T) {
	m := New()
	woke := make(chan struct{})
	go func() {
		m.Sleep(time.Second)
		close(woke)
	}()
	deadline := time.After(5 * time.Second)
	for {
		m.Add(100 * time.Millisecond)
		select {
		case <-woke:
			if m.Now().Before(time.Unix(1, 0)) {
				t.Fatalf("woke at %v, before a second had passed", m.Now())
			}
			return
		case <-deadline:
			t.Fatal("Sleep(1s) did not wake after the clock moved on")
		case <-time.After(time.Millisecond):
		}
	}
}
