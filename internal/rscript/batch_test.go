package rscript_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// count is the script of these tests: it counts its calls on its key and
// answers its argument, so that an answer shows whose call it was and the
// count whether a call ran, and how often.
var count = rscript.New("count", "redis.call('INCR', KEYS[1]) return ARGV[1]")

// gate is a hook that holds every single command (or, with pipes, every
// pipeline) until it is opened, and counts what went through.
type gate struct {
	pipes  bool
	open   chan struct{}
	mu     sync.Mutex
	single int
	piped  []int // each pipeline's size
}

func newGate(pipes bool) *gate { return &gate{pipes: pipes, open: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			g.mu.Lock()
			g.single++
			g.mu.Unlock()
			if !g.pipes {
				<-g.open
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !isScript(cmds[0]) {
			return next(ctx, cmds) // the connection's set-up
		}
		g.mu.Lock()
		g.piped = append(g.piped, len(cmds))
		g.mu.Unlock()
		if g.pipes {
			<-g.open
		}
		return next(ctx, cmds)
	}
}

func isScript(cmd redis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

func (g *gate) counts() (single int, piped []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.single, append([]int(nil), g.piped...)
}

// client is a client of r with the gate g and count loaded, so that no call
// answers NOSCRIPT and is sent again.
func client(t *testing.T, r *testsupport.Redis, g *gate) redis.UniversalClient {
	c := r.Client(t)
	if err := count.Load(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	c.AddHook(g)
	return c
}

// waitQueued waits until n calls wait in b's queue.
func waitQueued(t *testing.T, b *rscript.Batcher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := rscript.Queued(b)
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after 10 s, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// call runs count through b on key with arg and checks nothing but the
// transport: it returns the answer and error.
func call(ctx context.Context, b *rscript.Batcher, key, arg string) (string, error) {
	v, err := count.Run(ctx, b, []string{key}, arg).Text()
	return v, err
}

// held is a Batcher with one solo round trip, taken by a first call that
// the gate g holds in Redis's stead until the test opens it.
type held struct {
	c     redis.UniversalClient
	g     *gate
	b     *rscript.Batcher
	key   string
	first chan error // the first call's error, once g opens
}

// holdFirst starts a held Batcher on a client of r's with hooks (after the
// gate), and returns once its first call reached the gate.
func holdFirst(t *testing.T, r *testsupport.Redis, hooks ...redis.Hook) *held {
	t.Helper()
	g := newGate(false)
	c := client(t, r, g)
	for _, hk := range hooks {
		c.AddHook(hk)
	}
	h := &held{c: c, g: g, b: rscript.NewBatcher(c, 1), key: r.Key("n"), first: make(chan error, 1)}
	go func() { _, err := call(context.Background(), h.b, h.key, "first"); h.first <- err }()
	waitSingle(t, g, 1)
	return h
}

func TestBatcherSendsWaitingCallsInOnePipeline(t *testing.T) {
	r := testsupport.StartRedis(t)
	h := holdFirst(t, r)
	c, g, b, key, first := h.c, h.g, h.b, h.key, h.first
	ctx := context.Background()

	// The first call holds the one solo round trip; the next 10 wait.
	var wg sync.WaitGroup
	answers := make([]string, 10)
	errs := make([]error, 10)
	for i := range answers {
		wg.Go(func() { answers[i], errs[i] = call(ctx, b, key, "call-"+strconv.Itoa(i)) })
	}
	waitQueued(t, b, 10)
	close(g.open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range answers {
		if errs[i] != nil || answers[i] != "call-"+strconv.Itoa(i) {
			t.Fatalf("call %d: %q, %v: each caller gets its own call's answer", i, answers[i], errs[i])
		}
	}
	single, piped := g.counts()
	if single != 1 || len(piped) != 1 || piped[0] != 10 {
		t.Fatalf("%d calls on their own and pipelines %v, want the first alone and the 10 waiting in one pipeline", single, piped)
	}
	if n, err := c.Get(ctx, key).Int(); err != nil || n != 11 {
		t.Fatalf("the script ran %d times (%v), want 11: each call exactly once", n, err)
	}
}

// callAll runs workers goroutines through b, each making calls calls of
// count on a key of its own, each checked for its own answer.
func callAll(t *testing.T, b *rscript.Batcher, r *testsupport.Redis, workers, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("%d-%d", w, i)
				if v, err := call(context.Background(), b, r.Key("k", strconv.Itoa(w)), want); err != nil || v != want {
					t.Errorf("%q, %v, want %q", v, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// openBatcher is a Batcher letting solo calls alone, over a client of r's
// whose open gate counts what goes through.
func openBatcher(t *testing.T, r *testsupport.Redis, solo int) (redis.UniversalClient, *gate, *rscript.Batcher) {
	t.Helper()
	g := newGate(true)
	close(g.open)
	c := client(t, r, g)
	return c, g, rscript.NewBatcher(c, solo)
}

func TestBatcherAloneSendsNoPipeline(t *testing.T) {
	r := testsupport.StartRedis(t)
	_, g, b := openBatcher(t, r, 2)
	ctx := context.Background()
	// Two callers never find two round trips of theirs in flight and a
	// third: nothing waits.
	callAll(t, b, r, 2, 100)
	if single, piped := g.counts(); single != 200 || len(piped) != 0 {
		t.Fatalf("%d calls on their own, pipelines %v: within the solo limit every call goes on its own", single, piped)
	}
	// Nothing in flight: Wait answers at once, even under a context that
	// has ended (a Node closed with little time left reports no error).
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 {
		if err := b.Wait(ended); err != nil {
			t.Fatalf("Wait on a Batcher with nothing in flight: %v", err)
		}
	}
}

func TestBatcherManyCallersEachCallOnce(t *testing.T) {
	r := testsupport.StartRedis(t)
	c, g, b := openBatcher(t, r, 2)
	ctx := context.Background()
	const workers, calls = 32, 100
	callAll(t, b, r, workers, calls)
	for w := range workers {
		if n, err := c.Get(ctx, r.Key("k", strconv.Itoa(w))).Int(); err != nil || n != calls {
			t.Fatalf("worker %d: its script ran %d times (%v), want %d", w, n, err, calls)
		}
	}
	single, piped := g.counts()
	sent := single
	for _, p := range piped {
		sent += p
	}
	if sent != workers*calls {
		t.Fatalf("%d calls sent, want %d", sent, workers*calls)
	}
	t.Logf("%d calls: %d on their own, %d in %d pipelines", sent, single, sent-single, len(piped))
}

func TestBatcherCallerLeavesTheQueueOnItsDeadline(t *testing.T) {
	r := testsupport.StartRedis(t)
	h := holdFirst(t, r)
	c, g, b, key, first := h.c, h.g, h.b, h.key, h.first
	ctx := context.Background()

	// A call that waits for a round trip held up ends at its own deadline,
	// and a cancelled one at once: neither is sent.
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := call(dctx, b, key, "late")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("returned after %s, its deadline 100 ms", took)
	}
	cctx, cancelNow := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { _, err := call(cctx, b, key, "cancelled"); gone <- err }()
	waitQueued(t, b, 2)
	cancelNow()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want the cancel", err)
	}
	// One that waits on is sent, alone, once the round trip is free.
	stays := make(chan string, 1)
	go func() { v, _ := call(ctx, b, key, "stays"); stays <- v }()
	waitQueued(t, b, 3)
	close(g.open)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if v := <-stays; v != "stays" {
		t.Fatalf("the call that waited on answered %q", v)
	}
	if n, err := c.Get(ctx, key).Int(); err != nil || n != 2 {
		t.Fatalf("the script ran %d times (%v), want 2: the calls that left were never sent", n, err)
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitSingle waits until n single calls reached the gate.
func waitSingle(t *testing.T, g *gate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if single, _ := g.counts(); single >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call reached Redis in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBatcherHungPipelineEndsByItsEarliestDeadline(t *testing.T) {
	// A Redis that accepts connections and never answers: every call hangs
	// (the client's read timeout is a minute).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Minute, MaxRetries: -1,
		ContextTimeoutEnabled: true})
	defer c.Close()
	b := rscript.NewBatcher(c, 1)
	ctx := context.Background()

	// The solo call ends at its deadline (2 s: time for the others to queue
	// behind it on a loaded machine); the two sent in the pipeline behind it
	// end with it at the earlier of theirs (2.5 s): the one with a minute
	// left fails early rather than have the other wait past its own.
	var wg sync.WaitGroup
	start := time.Now()
	for i, d := range []time.Duration{2 * time.Second, 2500 * time.Millisecond, time.Minute} {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			if _, err := call(cctx, b, "k", "x"); err == nil {
				t.Errorf("call %d answered by a server that never answers", i)
			}
			if took := time.Since(start); took > 12*time.Second {
				t.Errorf("call %d (deadline %s) returned after %s: held past the earliest deadline of its pipeline", i, d, took)
			}
		})
		if i == 0 {
			waitSolo(t, b)
		}
	}
	waitQueued(t, b, 2)
	wg.Wait()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Wait(wctx); err != nil {
		t.Fatalf("pipelines still in flight 10 s after every deadline: %v", err)
	}
}

func TestBatcherSentCallEndsWithItsPipeline(t *testing.T) {
	r := testsupport.StartRedis(t)
	pipe := newGate(true)
	h := holdFirst(t, r, pipe)
	single, b, key, first := h.g, h.b, h.key, h.first
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   string
		err error
	}
	sent := make(chan answer, 1)
	go func() { v, err := call(cctx, b, key, "sent"); sent <- answer{v, err} }()
	other := make(chan answer, 1)
	go func() { v, err := call(ctx, b, key, "other"); other <- answer{v, err} }()
	waitQueued(t, b, 2)
	close(single.open) // first ends; the two waiting go in one pipeline, held
	waitPiped(t, pipe, 1)
	cancel()
	select {
	case a := <-sent:
		t.Fatalf("a call in a pipeline under way returned (%q, %v) when its context ended: it may still be written", a.v, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(pipe.open)
	for name, ch := range map[string]chan answer{"sent": sent, "other": other} {
		if a := <-ch; a.err != nil || a.v != name {
			t.Fatalf("%s answered %q, %v: a caller's cancel cuts no pipeline short", name, a.v, a.err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// waitSolo waits until b has a round trip in flight.
func waitSolo(t *testing.T, b *rscript.Batcher) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rscript.InFlight(b) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no round trip in flight after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitPiped waits until n pipelines reached the gate.
func waitPiped(t *testing.T, g *gate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, piped := g.counts(); len(piped) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pipeline reached Redis in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// panicky is a hook whose pipelines panic while on.
type panicky struct{ on atomic.Bool }

func (h *panicky) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *panicky) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *panicky) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() && len(cmds) > 0 && isScript(cmds[0]) {
			panic("a hook's bug")
		}
		return next(ctx, cmds)
	}
}

func TestBatcherPipelinePanicFailsItsCallsOnly(t *testing.T) {
	r := testsupport.StartRedis(t)
	ph := &panicky{}
	ph.on.Store(true)
	h := holdFirst(t, r, ph)
	g, b, key, first := h.g, h.b, h.key, h.first
	ctx := context.Background()
	errs := make(chan error, 2)
	for i := range 2 {
		go func() { _, err := call(ctx, b, key, strconv.Itoa(i)); errs <- err }()
	}
	waitQueued(t, b, 2)
	close(g.open)
	for range 2 {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("a call in a pipeline that panicked: %v, want the panic as its error", err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	ph.on.Store(false)
	if v, err := call(ctx, b, key, "after"); err != nil || v != "after" {
		t.Fatalf("a call after the panic: %q, %v", v, err)
	}
}
