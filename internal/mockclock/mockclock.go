// Package mockclock is the virtual clock the project's tests drive: a
// benbjohnson/clock Mock whose ticks are delivered once each.
//
// clock.Mock (v1.3.5, the module's last release) fires due timers from
// Timer as well as from Add: a Ticker's Tick sends on its channel before it
// moves the ticker's next time, so a goroutine that receives the tick and
// creates a Timer (as every presence beat does, for its deadline) runs the
// due timers again and receives the same tick twice. A beat loop under test
// then beats twice for one Add. Mock serialises Add, Set and timer creation,
// so a timer created while Add runs is created after it.
//
// It imports nothing of the project, so every package's own tests can use
// it.
package mockclock

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Mock is a clock.Mock whose Add and Set finish before a Timer, After or
// Sleep begins. Create it with New.
type Mock struct {
	*clock.Mock
	mu sync.Mutex // held across Add and Set, and while a timer is made
}

var _ clock.Clock = (*Mock)(nil)

// New returns a Mock set at the Unix epoch, as clock.NewMock.
func New() *Mock { return &Mock{Mock: clock.NewMock()} }

// Add moves the clock forward by d and fires the timers due by then.
func (m *Mock) Add(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Mock.Add(d)
}

// Set moves the clock to t and fires the timers due by then.
func (m *Mock) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Mock.Set(t)
}

// WaitForAllTimers moves the clock past every timer, firing each.
func (m *Mock) WaitForAllTimers() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mock.WaitForAllTimers()
}

// Timer returns a timer that fires d after now on this clock.
func (m *Mock) Timer(d time.Duration) *clock.Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mock.Timer(d)
}

// After returns a channel that receives the time d after now.
func (m *Mock) After(d time.Duration) <-chan time.Time { return m.Timer(d).C }

// Sleep blocks until the clock has moved d forward (from another goroutine).
func (m *Mock) Sleep(d time.Duration) { <-m.After(d) }
