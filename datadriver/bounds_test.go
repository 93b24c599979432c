package datadriver

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/mockclock"
)

type boundTestKey struct{}

// TestBoundedCallsShareADeadlineNeverLaterThanTheirOwn: calls under a
// context that never ends share one deadline context while they start
// within d/boundShare of the first; each ends at its own now+d or up to
// d/boundShare before, never after, and carries its own context's values.
func TestBoundedCallsShareADeadlineNeverLaterThanTheirOwn(t *testing.T) {
	mock := mockclock.New()
	b := &callBounds{clock: mock}
	const d = 10 * time.Second
	grain := d / boundShare

	first, cancel := b.within(context.WithValue(context.Background(), boundTestKey{}, "a"), d)
	defer cancel()
	mock.Add(grain / 2)
	second, cancel2 := b.within(context.WithValue(context.Background(), boundTestKey{}, "b"), d)
	defer cancel2()
	if first.Done() != second.Done() {
		t.Fatal("two calls started within the grain do not share their deadline")
	}
	if first.Value(boundTestKey{}) != "a" || second.Value(boundTestKey{}) != "b" {
		t.Fatalf("values %v and %v, want each call's own (a, b)", first.Value(boundTestKey{}), second.Value(boundTestKey{}))
	}
	mock.Add(grain)
	third, cancel3 := b.within(context.Background(), d)
	defer cancel3()
	if third.Done() == first.Done() {
		t.Fatal("a call started a grain later shares the first's deadline, which is too early for it")
	}

	// The second call's own deadline is grain/2 after the first's: it ends
	// at the first's, not after its own and not before it by a grain.
	mock.Add(d - grain - grain/2 - time.Millisecond)
	if second.Err() != nil {
		t.Fatalf("ended %s before its own deadline: %v", grain/2+time.Millisecond, second.Err())
	}
	mock.Add(time.Millisecond)
	if !errors.Is(second.Err(), context.DeadlineExceeded) || !errors.Is(first.Err(), context.DeadlineExceeded) {
		t.Fatalf("at the first call's deadline: %v and %v, want both ended (deadline exceeded)", first.Err(), second.Err())
	}
	if third.Err() != nil {
		t.Fatalf("the third call ended %s before its deadline", grain)
	}
	mock.Add(grain)
	if third.Err() != nil {
		t.Fatalf("the third call ended %s before its deadline", grain/2)
	}
	mock.Add(grain / 2)
	if !errors.Is(third.Err(), context.DeadlineExceeded) {
		t.Fatalf("the third call at its deadline: %v", third.Err())
	}
}

// TestBoundedCallsUnderACallersContextShareOnceItRepeats: a caller's
// context that can end (a server's, cancelled at its shutdown) shares the
// deadlines of a bound once it is the context of two calls in a row: each
// call then ends at its own now+d or up to d/boundShare before, carries
// the context's values, and ends with the context.
func TestBoundedCallsUnderACallersContextShareOnceItRepeats(t *testing.T) {
	mock := mockclock.New()
	b := &callBounds{clock: mock}
	const d = 10 * time.Second
	grain := d / boundShare
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), boundTestKey{}, "server"))
	first, cancel := b.within(parent, d)
	defer cancel()
	second, cancel2 := b.within(parent, d)
	defer cancel2()
	mock.Add(grain / 2)
	third, cancel3 := b.within(parent, d)
	defer cancel3()
	if first.Done() == second.Done() {
		t.Fatal("the first call under a context that can end shares a deadline")
	}
	if second.Done() != third.Done() {
		t.Fatal("calls under a context that repeats, a half grain apart, do not share their deadline")
	}
	for i, c := range []context.Context{first, second, third} {
		if c.Value(boundTestKey{}) != "server" {
			t.Fatalf("call %d lost its context's value: %v", i+1, c.Value(boundTestKey{}))
		}
	}
	if dl, _ := third.Deadline(); dl.After(mock.Now().Add(d)) || !dl.After(mock.Now().Add(d-grain)) {
		t.Fatalf("the third call's deadline is %v after its start, want within (%v, %v]", dl.Sub(mock.Now()), d-grain, d)
	}
	cancelParent()
	if !endsSoon(third) || !errors.Is(third.Err(), context.Canceled) || !endsSoon(first) {
		t.Fatalf("after its context's cancel: %v and %v, want both canceled", first.Err(), third.Err())
	}
	late, cancel4 := b.within(parent, d)
	defer cancel4()
	if !endsSoon(late) {
		t.Fatal("a call under a context that was cancelled did not end")
	}
}

// TestBoundedCallsUnderRequestContextsShareNothing: contexts that each
// carry one call (a request's) get deadlines of their own, which their
// cancel ends at once; a context of two calls in a row takes the sharing
// over from the one before, whose calls in flight keep their deadline; no
// more than one sharing context is held per bound.
func TestBoundedCallsUnderRequestContextsShareNothing(t *testing.T) {
	mock := mockclock.New()
	b := &callBounds{clock: mock}
	const d = time.Second
	server, cancelServer := context.WithCancel(context.Background())
	defer cancelServer()
	b.within(server, d)
	inFlight, _ := b.within(server, d) // the server's context shares now
	for i := range 100 {
		req, cancelReq := context.WithCancel(server)
		call, cancel := b.within(req, d)
		if call.Done() == inFlight.Done() {
			t.Fatalf("request %d shares the server context's deadline", i)
		}
		cancel()
		if !endsSoon(call) {
			t.Fatalf("request %d: its call's cancel did not end it", i)
		}
		cancelReq()
		if again, _ := b.within(server, d); again.Done() != inFlight.Done() {
			t.Fatalf("after request %d, the server context no longer shares", i)
		}
	}
	if n := len(b.shared); n != 1 {
		t.Fatalf("%d shared deadlines after 100 requests, want the server context's one", n)
	}
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	b.within(other, d)
	took, _ := b.within(other, d)
	if took.Done() == inFlight.Done() {
		t.Fatal("a context of two calls in a row did not take the sharing over")
	}
	if n := len(b.shared); n != 1 {
		t.Fatalf("%d shared deadlines once another context took over, want 1", n)
	}
	if inFlight.Err() != nil {
		t.Fatalf("a call in flight under the context before ended when another took over: %v", inFlight.Err())
	}
	mock.Add(d)
	if !endsSoon(inFlight) {
		t.Fatal("a call in flight under the context before did not end at its deadline")
	}
}

// valueCtx is a context that is not a pointer and cannot be compared (its
// map): its calls are bounded, never compared.
type valueCtx struct {
	context.Context
	tags map[string]string
}

// TestBoundedCallUnderAContextThatCannotCompare: a context that can end
// and is not a pointer gets a deadline of its own, each call, without a
// panic.
func TestBoundedCallUnderAContextThatCannotCompare(t *testing.T) {
	b := &callBounds{clock: mockclock.New()}
	parent, cancelParent := context.WithCancel(context.Background())
	ctx := valueCtx{Context: parent, tags: map[string]string{}}
	first, cancel := b.within(ctx, time.Second)
	defer cancel()
	second, cancel2 := b.within(ctx, time.Second)
	defer cancel2()
	if first.Done() == second.Done() {
		t.Fatal("calls under a context that cannot compare share a deadline")
	}
	cancelParent()
	if !endsSoon(second) {
		t.Fatal("a call did not end with its context")
	}
}

// TestBoundedCallUnderAnEarlierDeadline: a context whose own deadline
// comes within the bound is the call's as it is; one whose deadline comes
// later gets the bound.
func TestBoundedCallUnderAnEarlierDeadline(t *testing.T) {
	mock := mockclock.New()
	b := &callBounds{clock: mock}
	early, cancelEarly := mock.WithTimeout(context.Background(), time.Second)
	defer cancelEarly()
	ctx, cancel := b.within(early, 2*time.Second)
	defer cancel()
	if ctx != early {
		t.Fatal("a context ending before the bound was wrapped")
	}
	late, cancelLate := mock.WithTimeout(context.Background(), time.Minute)
	defer cancelLate()
	bounded, cancel2 := b.within(late, 2*time.Second)
	defer cancel2()
	if dl, _ := bounded.Deadline(); !dl.Equal(mock.Now().Add(2 * time.Second)) {
		t.Fatalf("a context ending after the bound has deadline %v, want the bound's %v", dl, mock.Now().Add(2*time.Second))
	}
}

// TestEndsWithEndsWithTheDriver: a load under a context that never ends
// ends when the Driver's context does, its calls too (they share their
// deadline until then), and the shared deadlines of a Driver that has
// ended are forgotten.
func TestEndsWithEndsWithTheDriver(t *testing.T) {
	b := &callBounds{clock: mockclock.New()}
	driverCtx, cancelDriver := context.WithCancel(context.Background())
	caller := context.WithValue(context.Background(), boundTestKey{}, "caller")
	load, ok := endsWith(caller, driverCtx)
	if !ok {
		t.Fatal("endsWith refused a context that never ends")
	}
	if _, ok := endsWith(driverCtx, driverCtx); ok {
		t.Fatal("endsWith took a context that can end")
	}
	call, cancel := b.within(load, time.Second)
	defer cancel()
	call2, cancel2 := b.within(load, time.Second)
	defer cancel2()
	if call.Done() != call2.Done() {
		t.Fatal("two calls of a load do not share their deadline")
	}
	if load.Value(boundTestKey{}) != "caller" || call.Value(boundTestKey{}) != "caller" {
		t.Fatal("the load or its call lost the caller's values")
	}
	cancelDriver()
	b.forget(driverCtx)
	if load.Err() == nil || call.Err() == nil {
		t.Fatalf("after the Driver's end: load %v, call %v, want both ended", load.Err(), call.Err())
	}
	late, cancel3 := b.within(load, time.Second)
	defer cancel3()
	if !endsSoon(late) {
		t.Fatal("a call after the Driver's end did not end")
	}
	if len(b.shared) != 0 {
		t.Fatalf("%d shared deadlines left after the Driver's end", len(b.shared))
	}
}

// TestContextsUnderABoundedCallStartNoGoroutine: context.WithCancel under a
// bounded call registers with the shared deadline, as under any context of
// the context package, instead of starting a goroutine to watch it.
func TestContextsUnderABoundedCallStartNoGoroutine(t *testing.T) {
	b := &callBounds{clock: clock.New()} // the context package's own deadlines
	ctx, cancel := b.within(context.Background(), time.Minute)
	defer cancel()
	if n := goroutinesOfChildren(ctx, 200); n > 50 {
		t.Fatalf("200 contexts under a bounded call started %d goroutines", n)
	}
}

// goroutinesOfChildren is how many goroutines n context.WithCancel children
// of ctx start (each would watch ctx if it were not one the context package
// can register them with); it cancels them.
func goroutinesOfChildren(ctx context.Context, n int) int {
	before := runtime.NumGoroutine()
	cancels := make([]context.CancelFunc, 0, n)
	for range n {
		_, c := context.WithCancel(ctx)
		cancels = append(cancels, c)
	}
	started := runtime.NumGoroutine() - before
	for _, c := range cancels {
		c()
	}
	return started
}

// endsSoon reports whether ctx ends within a second of real time (the mock
// clock's contexts hear their parent's end on a goroutine of their own).
func endsSoon(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(time.Second):
		return false
	}
}

// TestTheExecutorsWorkSharesBounds: the executors' own writes (an
// autosave) under the Driver's context share their deadlines, carry the
// Driver context's values and end with it.
func TestTheExecutorsWorkSharesBounds(t *testing.T) {
	b := &callBounds{clock: clock.New()}
	driverCtx, cancelDriver := context.WithCancel(context.WithValue(context.Background(), boundTestKey{}, "node"))
	bg := sharesBounds(driverCtx)
	first, cancel := b.within(bg, time.Minute)
	defer cancel()
	second, cancel2 := b.within(bg, time.Minute)
	defer cancel2()
	if first.Done() != second.Done() {
		t.Fatal("two writes of the executors do not share their deadline")
	}
	if first.Value(boundTestKey{}) != "node" {
		t.Fatal("a write of the executors lost the Driver context's values")
	}
	if n := goroutinesOfChildren(bg, 100); n > 25 {
		t.Fatalf("100 contexts under the Driver's started %d goroutines", n)
	}
	cancelDriver()
	b.forget(driverCtx)
	if !endsSoon(first) || !endsSoon(bg) {
		t.Fatal("the executors' work did not end with the Driver")
	}
}

// TestBoundedCallsWithoutValuesAllocateNothing: a call under
// context.Background(), under the executors' own context or under a
// caller's context that shares carries no values but its shared deadline's
// parent's, so it is given that deadline context itself (no wrapper:
// nothing allocated once the deadline is made); a call under a context
// with values of its own keeps them.
func TestBoundedCallsWithoutValuesAllocateNothing(t *testing.T) {
	b := &callBounds{clock: mockclock.New()} // still: every call within the first's grain
	driverCtx, cancel := context.WithCancel(context.WithValue(context.Background(), boundTestKey{}, "node"))
	defer cancel()
	bg := sharesBounds(driverCtx)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want any
	}{{"context.Background()", context.Background(), nil}, {"the executors' context", bg, "node"},
		{"a caller's context that can end", driverCtx, "node"}} {
		// A context that can end shares once it repeats.
		b.within(tc.ctx, time.Minute)
		c, _ := b.within(tc.ctx, time.Minute) // makes the shared deadline
		if allocs := testing.AllocsPerRun(100, func() { c, _ = b.within(tc.ctx, time.Minute) }); allocs != 0 {
			t.Errorf("a call under %s allocates %.1f objects; want none", tc.name, allocs)
		}
		if _, ok := c.Deadline(); !ok || c.Value(boundTestKey{}) != tc.want {
			t.Errorf("a call under %s: deadline %t, value %v; want a deadline and %v", tc.name, ok, c.Value(boundTestKey{}), tc.want)
		}
	}
	withValue := context.WithValue(context.Background(), boundTestKey{}, "call")
	if c, _ := b.within(withValue, time.Minute); c.Value(boundTestKey{}) != "call" {
		t.Fatalf("a call under a context with a value of its own lost it: %v", c.Value(boundTestKey{}))
	}
}
