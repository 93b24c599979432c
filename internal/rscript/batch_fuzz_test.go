package rscript_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/rscript"
)

// FuzzBatcher attacks the Batcher's bookkeeping with schedules of calls,
// cancels, deadlines, answers, failures and panics that the fuzzer chooses,
// over a fake transport (hooks that answer in Redis's stead, holding each
// round trip until the schedule lets it go): a plain client, or a Redis
// Cluster client of three masters, each its own lane. Whatever the
// schedule, a user would notice none of these:
//
//   - a lane with more round trips in flight than SoloCalls (before Wait);
//
//   - a pipeline of calls to two masters;
//
//   - a call sent twice, or sent after its caller returned;
//
//   - an answer that is another call's;
//
//   - a call failing with context.Canceled whose own context was never
//     cancelled (another caller's cancel ended it), or with
//     DeadlineExceeded when neither it nor a call sent with it had a
//     deadline;
//
//   - a call that never returns once Redis answers, or a Wait that does
//     not return once every call did.
//
//     go test -run '^$' -fuzz FuzzBatcher -fuzztime 2m ./internal/rscript/
func FuzzBatcher(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 2, 2})
	f.Add([]byte{2, 0, 8, 16, 24, 32, 2, 2, 2, 2, 2})
	f.Add([]byte{1, 0, 8, 9, 17, 4, 2, 3, 11, 5, 2, 2})
	f.Add([]byte{5, 32, 40, 48, 56, 1, 9, 5, 5, 2, 3, 2, 4, 12, 2})
	f.Add([]byte{3, 64, 72, 80, 88, 96, 104, 2, 11, 3, 2, 2, 2, 2})
	f.Add([]byte{0, 0, 8, 0, 2, 12, 5, 2})
	f.Add([]byte{2, 0, 16, 0, 0, 2, 5, 5, 2})
	f.Add([]byte{0, 0, 8, 0, 2, 6, 12, 5, 2}) // one caller's cancel in a held pipeline
	f.Add([]byte{0, 0, 0, 0, 2, 6, 11, 2})    // a pipeline's hook panics
	f.Add([]byte{0, 0, 6, 11, 0, 2})          // a lone call's hook panics, then a call
	// a deadline in a held pipeline, passed by 75 ms when the schedule answers it
	f.Add(append(append([]byte{0, 0, 16, 0, 2, 6}, bytes.Repeat([]byte{21}, 25)...), 2))
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0, 0, 4, 12, 20, 28, 2, 2, 2, 2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, schedule []byte) {
		if len(schedule) == 0 || len(schedule) > 200 {
			t.Skip()
		}
		runSchedule(t, schedule)
	})
}

// errAnswered is the fake's failure of a round trip.
var errAnswered = errors.New("fake redis: injected failure")

// ctxKind is the context a scheduled call runs under.
type ctxKind int

const (
	ctxNever    ctxKind = iota // context.Background
	ctxCancel                  // cancelled when the schedule says
	ctxDeadline                // a deadline 1 to 3 ms away
)

// fuzzCall is one call of a schedule.
type fuzzCall struct {
	id     string
	kind   ctxKind
	cancel context.CancelFunc
	// cancelled: the schedule cancelled its context
	cancelled bool
	done      chan struct{}
	val       string
	err       error
}

// outcome is how the fake answers a round trip.
type outcome int

const (
	answer outcome = iota
	fail
	explode
)

// trip is a round trip held by the fake.
type trip struct {
	ids     []string
	release chan outcome
}

// fakeRedis answers script calls in Redis's stead (each with its call's
// argument) and checks what reaches it.
type fakeRedis struct {
	solo int
	lane func(key string) string

	mu       sync.Mutex
	closed   bool            // Wait began: lanes are no longer bounded
	inflight map[string]int  // round trips at the transport, by lane
	held     []*trip         // waiting for the schedule, oldest first
	auto     bool            // answer at once, from now on
	seen     map[string]int  // times each call reached the transport
	returned map[string]bool // calls whose caller returned
	tripOf   map[string][]string
	// deadlines of the calls that have one
	deadlines map[string]time.Time
	bad       []string
	arrived   chan struct{} // a round trip reached the fake (buffered 1)
}

func (f *fakeRedis) violate(format string, a ...any) {
	f.bad = append(f.bad, fmt.Sprintf(format, a...))
}

// callOf is the key and id of a script call (EVALSHA sha 1 key id).
func callOf(cmd redis.Cmder) (key, id string) {
	a := cmd.Args()
	if len(a) < 5 {
		return "", ""
	}
	key, _ = a[3].(string)
	id, _ = a[4].(string)
	return key, id
}

// roundTrip holds cmds (one round trip: alone or a pipeline) until the
// schedule or their context ends it, then answers them.
func (f *fakeRedis) roundTrip(ctx context.Context, cmds []redis.Cmder) error {
	ids := make([]string, len(cmds))
	lane := ""
	f.mu.Lock()
	for i, cmd := range cmds {
		key, id := callOf(cmd)
		ids[i] = id
		l := f.lane(key)
		if i == 0 {
			lane = l
		} else if l != lane {
			f.violate("a pipeline of %v spans lanes %q and %q", ids, lane, l)
		}
		f.seen[id]++
		if f.seen[id] > 1 {
			f.violate("call %s sent %d times", id, f.seen[id])
		}
		if f.returned[id] {
			f.violate("call %s sent after its caller returned", id)
		}
		f.tripOf[id] = ids
	}
	var earliest time.Time
	for _, id := range ids {
		if d, ok := f.deadlines[id]; ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if d, ok := ctx.Deadline(); !earliest.IsZero() && (!ok || !d.Equal(earliest)) {
		f.violate("the round trip of %v has deadline %v (set %v), not its calls' earliest, %v", ids, d, ok, earliest)
	}
	f.inflight[lane]++
	if !f.closed && f.inflight[lane] > f.solo {
		f.violate("lane %q has %d round trips in flight, SoloCalls %d", lane, f.inflight[lane], f.solo)
	}
	tr := &trip{ids: ids, release: make(chan outcome, 1)}
	if f.auto {
		tr.release <- answer
	} else {
		f.held = append(f.held, tr)
	}
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	var out outcome
	var err error
	select {
	case out = <-tr.release:
		// A round trip whose context ended is answered by the context: one
		// the schedule answers long past its earliest deadline was not ended
		// by it (50 ms: a timer's lag on a loaded machine is far less).
		if !earliest.IsZero() && time.Since(earliest) > 50*time.Millisecond {
			f.mu.Lock()
			f.violate("the round trip of %v was held %v past its earliest deadline", ids, time.Since(earliest))
			f.mu.Unlock()
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	f.mu.Lock()
	f.inflight[lane]--
	f.held = slices.DeleteFunc(f.held, func(h *trip) bool { return h == tr })
	f.mu.Unlock()
	if err != nil {
		for _, cmd := range cmds {
			cmd.SetErr(err)
		}
		return err
	}
	switch out {
	case fail:
		for _, cmd := range cmds {
			cmd.SetErr(errAnswered)
		}
		return errAnswered
	case explode:
		panic("fake redis: a hook panicked")
	}
	for i, cmd := range cmds {
		cmd.(*redis.Cmd).SetVal(ids[i])
	}
	return nil
}

// release ends the oldest held round trip with out, if one is held.
func (f *fakeRedis) release(out outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.held) == 0 {
		return
	}
	tr := f.held[0]
	f.held = f.held[1:]
	tr.release <- out
}

// awaitHeld waits, at most d, until a round trip is held.
func (f *fakeRedis) awaitHeld(d time.Duration) {
	limit := time.Now().Add(d)
	for time.Now().Before(limit) {
		f.mu.Lock()
		n := len(f.held)
		f.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-f.arrived:
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// answerAll answers every held round trip, and every later one at once.
func (f *fakeRedis) answerAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auto = true
	for _, tr := range f.held {
		tr.release <- answer
	}
	f.held = nil
}

func (f *fakeRedis) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *fakeRedis) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return f.roundTrip(ctx, []redis.Cmder{cmd})
	}
}

func (f *fakeRedis) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return f.roundTrip(ctx, cmds)
	}
}

// fakeClient is a client whose every round trip f answers: nothing is
// dialled. With cluster, a Redis Cluster client of three masters (slots in
// three ranges), and f's lanes are their addresses.
func fakeClient(t *testing.T, f *fakeRedis, cluster bool) redis.UniversalClient {
	t.Helper()
	if !cluster {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		c.AddHook(f)
		f.lane = func(string) string { return "" }
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	masters := []string{"127.0.0.1:11", "127.0.0.1:12", "127.0.0.1:13"}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		MaxRetries: -1,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{
				{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{Addr: masters[0]}}},
				{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{Addr: masters[1]}}},
				{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{Addr: masters[2]}}},
			}, nil
		},
	})
	cc.AddHook(f)
	f.lane = func(key string) string {
		m, err := cc.MasterForKey(context.Background(), key)
		if err != nil {
			return "?"
		}
		return m.Options().Addr
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// runSchedule runs one schedule: its first byte chooses the client (bit 0:
// a cluster) and SoloCalls (1 to 3); each later byte is a step (its low 3
// bits the kind, the rest its argument).
func runSchedule(t *testing.T, schedule []byte) {
	f := &fakeRedis{solo: 1 + int(schedule[0]>>1)%3, inflight: map[string]int{}, seen: map[string]int{},
		returned: map[string]bool{}, tripOf: map[string][]string{}, deadlines: map[string]time.Time{}, arrived: make(chan struct{}, 1)}
	rdb := fakeClient(t, f, schedule[0]&1 == 1)
	b := rscript.NewBatcher(rdb, f.solo)
	budget := &waitBudget{left: 300 * time.Millisecond}
	keys := []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"}
	var calls []*fuzzCall
	for _, step := range schedule[1:] {
		arg := int(step >> 3)
		switch step & 7 {
		case 0, 1: // a call
			if len(calls) >= 64 {
				continue
			}
			c := &fuzzCall{id: "c" + strconv.Itoa(len(calls)), kind: ctxKind(arg % 3), done: make(chan struct{})}
			calls = append(calls, c)
			startCall(f, b, c, keys[(arg/3)%len(keys)], time.Duration(1+arg%3)*time.Millisecond, budget.wait(50*time.Millisecond))
		case 2:
			f.release(answer)
		case 3:
			if arg%2 == 0 {
				f.release(fail)
			} else {
				f.release(explode)
			}
		case 4: // a cancel
			if len(calls) > 0 {
				if c := calls[arg%len(calls)]; c.kind == ctxCancel {
					c.cancelled = true
					c.cancel()
				}
			}
		case 5:
			time.Sleep(budget.wait(time.Duration(1+arg%3) * time.Millisecond))
		case 6: // until the fake holds a round trip (at most 50 ms)
			f.awaitHeld(budget.wait(50 * time.Millisecond))
		default:
			time.Sleep(100 * time.Microsecond)
		}
	}
	defer func() {
		for _, c := range calls {
			if c.cancel != nil {
				c.cancel()
			}
		}
	}()
	f.answerAll()
	deadline := time.After(10 * time.Second)
	for _, c := range calls {
		select {
		case <-c.done:
		case <-deadline:
			t.Fatalf("call %s never returned after every round trip was answered (schedule %v)", c.id, schedule)
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	if err := b.Wait(wctx); err != nil {
		t.Fatalf("Wait after every call returned: %v (schedule %v)", err, schedule)
	}
	checkCalls(t, f, calls, schedule)
}

// waitBudget is what a schedule's steps may wait in all, so that a long
// schedule of waits stays a fraction of a second.
type waitBudget struct{ left time.Duration }

// wait is d, or what is left of the budget when less; it is taken from it
// (a step waits at most that long).
func (w *waitBudget) wait(d time.Duration) time.Duration {
	d = min(d, w.left)
	w.left -= d
	return d
}

// startCall starts c on key through b, under a deadline wait away for a
// ctxDeadline call, and waits, at most settle, until it
// reached the fake, waits in a queue or returned, so that the schedule's
// next step meets it there.
func startCall(f *fakeRedis, b *rscript.Batcher, c *fuzzCall, key string, wait, settle time.Duration) {
	ctx := context.Background()
	switch c.kind {
	case ctxCancel:
		ctx, c.cancel = context.WithCancel(ctx)
	case ctxDeadline:
		ctx, c.cancel = context.WithTimeout(ctx, wait)
		d, _ := ctx.Deadline()
		f.mu.Lock()
		f.deadlines[c.id] = d
		f.mu.Unlock()
	}
	queued := rscript.Queued(b)
	go func() {
		defer close(c.done)
		defer func() {
			f.mu.Lock()
			f.returned[c.id] = true
			f.mu.Unlock()
		}()
		defer func() {
			if r := recover(); r != nil {
				c.err = fmt.Errorf("panicked: %v", r)
			}
		}()
		c.val, c.err = call(ctx, b, key, c.id)
	}()
	limit := time.Now().Add(settle)
	for time.Now().Before(limit) {
		f.mu.Lock()
		seen := f.seen[c.id] > 0
		f.mu.Unlock()
		if seen || rscript.Queued(b) > queued {
			return
		}
		select {
		case <-c.done:
			return
		case <-f.arrived:
		case <-time.After(50 * time.Microsecond):
		}
	}
}

// checkCalls fails t with what the fake saw wrong and every answer that is
// not its call's own.
func checkCalls(t *testing.T, f *fakeRedis, calls []*fuzzCall, schedule []byte) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.bad {
		t.Errorf("%s (schedule %v)", v, schedule)
	}
	byID := map[string]*fuzzCall{}
	for _, c := range calls {
		byID[c.id] = c
	}
	for _, c := range calls {
		switch {
		case c.err == nil:
			if c.val != c.id {
				t.Errorf("call %s answered %q, another call's answer (schedule %v)", c.id, c.val, schedule)
			}
		case errors.Is(c.err, context.Canceled):
			if !c.cancelled {
				t.Errorf("call %s, whose context was never cancelled, failed with %v (schedule %v)", c.id, c.err, schedule)
			}
		case errors.Is(c.err, context.DeadlineExceeded):
			withDeadline := c.kind == ctxDeadline
			for _, id := range f.tripOf[c.id] {
				withDeadline = withDeadline || byID[id].kind == ctxDeadline
			}
			if !withDeadline {
				t.Errorf("call %s failed with %v, but neither it nor a call sent with it had a deadline (schedule %v)",
					c.id, c.err, schedule)
			}
		case errors.Is(c.err, errAnswered) || strings.Contains(c.err.Error(), "panicked"):
			if f.seen[c.id] == 0 {
				t.Errorf("call %s failed with %v without reaching Redis (schedule %v)", c.id, c.err, schedule)
			}
		default:
			t.Errorf("call %s failed with %v, which neither Redis nor its context gave (schedule %v)", c.id, c.err, schedule)
		}
	}
}
