package mockclock

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// ticksPerAdd drives a ticker whose receiver makes a timer on every tick,
// as a beat loop does, and returns the tick times n Adds of one period
// delivered. After each Add it waits for one tick to be received, so the
// ticker's channel of one is empty before the next Add and no tick is
// dropped by a slow receiver; after the last it waits a little for any
// tick more. A clock that delivers one tick twice (clock.Mock does) shows
// as a tick time repeated and every later one late.
func ticksPerAdd(t *testing.T, c clock.Clock, add func(time.Duration), n int) []time.Time {
	t.Helper()
	tk := c.Ticker(period)
	defer tk.Stop()
	got := make(chan time.Time, 4*n)
	done := make(chan struct{})
	defer close(done)
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
	var ticks []time.Time
	for i := range n {
		add(period)
		select {
		case tv := <-got:
			ticks = append(ticks, tv)
		case <-time.After(5 * time.Second):
			t.Fatalf("add %d: no tick in 5 s", i)
		}
	}
	for {
		select {
		case tv := <-got:
			ticks = append(ticks, tv)
		case <-time.After(5 * time.Millisecond):
			return ticks
		}
	}
}

const period = 3 * time.Second

func TestOneTickPerPeriod(t *testing.T) {
	const adds = 8
	for round := range 200 {
		m := New()
		start := m.Now()
		ticks := ticksPerAdd(t, m, m.Add, adds)
		if len(ticks) != adds {
			t.Fatalf("round %d: %d ticks for %d periods", round, len(ticks), adds)
		}
		for i, tv := range ticks {
			if want := start.Add(time.Duration(i+1) * period); !tv.Equal(want) {
				t.Fatalf("round %d: tick %d at %v, want %v (a tick delivered twice)", round, i, tv.Sub(start), want.Sub(start))
			}
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
