package handoffcore_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// Names shared by the tests.
const (
	driverName = "PlayerData"
	playerKey  = "user:42"
	jobA       = "server-a" // the holder
	jobB       = "server-b" // the joiner
	jobC       = "server-c"
)

var (
	quiet      = slog.New(slog.DiscardHandler)
	errReadNet = errors.New("presence read: connection refused")
)

// sec turns seconds into a Duration, rounded to the microsecond so that
// sec(7.805) is exactly 7805 ms.
func sec(s float64) time.Duration {
	return time.Duration(math.Round(s*1e6)) * time.Microsecond
}

// ---------------------------------------------------------------------------
// fakePresence

var _ handoffcore.Presence = (*fakePresence)(nil)

// fakePresence is a presence hash in memory. A read answers ReadFn when set,
// else the reading set for the job (Unknown with errReadNet when none is).
// It records Start, Close and Remove calls and the time of every read.
type fakePresence struct {
	// ReadFn, when set, answers the n-th (from 0) read of job, made at
	// elapsed time at since the fake was created.
	ReadFn func(ctx context.Context, job string, n int, at time.Duration) presencecore.Reading

	clk   clock.Clock
	start time.Time

	mu       sync.Mutex
	readings map[string]presencecore.Reading
	reads    map[string][]time.Duration
}

// newFakePresence returns a fake whose read times count from now on clk
// (nil: clock.New()).
func newFakePresence(clk clock.Clock) *fakePresence {
	if clk == nil {
		clk = clock.New()
	}
	return &fakePresence{
		clk:      clk,
		start:    clk.Now(),
		readings: make(map[string]presencecore.Reading),
		reads:    make(map[string][]time.Duration),
	}
}

func (p *fakePresence) Read(ctx context.Context, job string) presencecore.Reading {
	at := p.clk.Since(p.start)
	p.mu.Lock()
	n := len(p.reads[job])
	p.reads[job] = append(p.reads[job], at)
	r, ok := p.readings[job]
	fn := p.ReadFn
	p.mu.Unlock()
	if fn != nil {
		return fn(ctx, job, n, at)
	}
	if !ok {
		return presencecore.Reading{Status: presencecore.Unknown, Err: errReadNet}
	}
	return r
}

// set makes every read of job answer r.
func (p *fakePresence) set(job string, r presencecore.Reading) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readings[job] = r
}

// readTimes returns the elapsed times of the reads of job.
func (p *fakePresence) readTimes(job string) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.reads[job]...)
}

// Readings used by the tests.
var (
	stopped  = presencecore.Reading{Status: presencecore.Stopped}
	unknown  = presencecore.Reading{Status: presencecore.Unknown, Err: errReadNet}
	alive10s = presencecore.Reading{Status: presencecore.Alive, ExpiresIn: 10 * time.Second}
)

// script answers the readings in order, repeating the last one.
func script(rs ...presencecore.Reading) func(context.Context, string, int, time.Duration) presencecore.Reading {
	return func(_ context.Context, _ string, n int, _ time.Duration) presencecore.Reading {
		return rs[min(n, len(rs)-1)]
	}
}

// until answers status with the time left until the elapsed time end, and
// Stopped from then on: a holder whose last beat expires at end (Alive), or
// a Redis run whose one-TTL grace ends at end (Unknown with a nil Err).
func until(status presencecore.Status, end time.Duration) func(context.Context, string, int, time.Duration) presencecore.Reading {
	return func(_ context.Context, _ string, _ int, at time.Duration) presencecore.Reading {
		if at < end {
			return presencecore.Reading{Status: status, ExpiresIn: end - at}
		}
		return stopped
	}
}

// ---------------------------------------------------------------------------
// fakeHolder

var _ handoffcore.ReleaseFunc = (*fakeHolder)(nil).release

// request is one request routed to a driver.
type request struct{ Key, Token, Purpose string }

// fakeHolder is a driver: its release method records the requests routed
// to it and answers each with a channel that is closed at once when AtOnce
// is set (it does not hold that lock, or lets it go at once), else when
// let is called for the key.
type fakeHolder struct {
	AtOnce bool

	mu   sync.Mutex
	got  []request
	open map[string][]chan struct{}
}

func (f *fakeHolder) release(key, token, purpose string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, request{key, token, purpose})
	ch := make(chan struct{})
	if f.AtOnce {
		close(ch)
		return ch
	}
	if f.open == nil {
		f.open = make(map[string][]chan struct{})
	}
	f.open[key] = append(f.open[key], ch)
	return ch
}

// let closes the channels of key's requests: the driver let the key go.
func (f *fakeHolder) let(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.open[key] {
		close(ch)
	}
	delete(f.open, key)
}

func (f *fakeHolder) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.got...)
}

// sendReply publishes a reply from server from to server to for key, as
// from's Handoff does once its driver let the key go.
func sendReply(wd *world, from, to, key string) {
	_ = wd.bus.Endpoint(from).Publish(context.Background(), to,
		messaging.Message{Type: messaging.TypeReply, Driver: driverName, Key: key})
}

// ---------------------------------------------------------------------------
// fakeBus

var _ messaging.Bus = (*fakeBus)(nil)

// fakeBus is a messaging.Bus of func fields (nil: Publish succeeds and
// Subscribe returns a subscription that delivers nothing) that counts
// Subscribe and Unsubscribe calls.
type fakeBus struct {
	PublishFn   func(ctx context.Context, to string, m messaging.Message) error
	SubscribeFn func(job string, h messaging.Handler) (messaging.Subscription, error)

	mu           sync.Mutex
	subscribes   int
	unsubscribes int
}

// countingBus wraps inner, counting its subscriptions.
func countingBus(inner messaging.Bus) *fakeBus {
	return &fakeBus{PublishFn: inner.Publish, SubscribeFn: inner.Subscribe}
}

func (b *fakeBus) Publish(ctx context.Context, to string, m messaging.Message) error {
	if b.PublishFn == nil {
		return nil
	}
	return b.PublishFn(ctx, to, m)
}

func (b *fakeBus) Subscribe(job string, h messaging.Handler) (messaging.Subscription, error) {
	b.mu.Lock()
	b.subscribes++
	b.mu.Unlock()
	var inner messaging.Subscription
	if b.SubscribeFn != nil {
		var err error
		if inner, err = b.SubscribeFn(job, h); err != nil {
			return nil, err
		}
	}
	return &fakeSub{bus: b, inner: inner}, nil
}

func (b *fakeBus) counts() (subscribes, unsubscribes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.subscribes, b.unsubscribes
}

type fakeSub struct {
	bus   *fakeBus
	inner messaging.Subscription
}

func (s *fakeSub) Unsubscribe() error {
	s.bus.mu.Lock()
	s.bus.unsubscribes++
	s.bus.mu.Unlock()
	if s.inner != nil {
		return s.inner.Unsubscribe()
	}
	return nil
}

// ---------------------------------------------------------------------------
// helpers

// world is one test's virtual time and bus. Create it inside a synctest
// bubble, where clock.New() runs on the bubble's fake time.
type world struct {
	clk   clock.Clock
	start time.Time
	bus   *testsupport.MemBus
}

func newWorld(tb testing.TB) *world {
	tb.Helper()
	clk := clock.New()
	bus := testsupport.NewMemBus(clk)
	tb.Cleanup(bus.Close)
	return &world{clk: clk, start: clk.Now(), bus: bus}
}

// elapsed is the virtual time since the world was created.
func (w *world) elapsed() time.Duration { return w.clk.Since(w.start) }

// handoff creates a Handoff closed at cleanup; Logger defaults to quiet and
// Clock to the world's.
func (w *world) handoff(tb testing.TB, cfg handoffcore.Config) *handoffcore.Handoff {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.Clock == nil {
		cfg.Clock = w.clk
	}
	h, err := handoffcore.New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return h
}

// received is one message seen on a subject, at an elapsed virtual time.
type received struct {
	At  time.Duration
	To  string
	Msg messaging.Message
}

// recorder records every message sent to some servers' subjects.
type recorder struct {
	mu  sync.Mutex
	got []received
}

// record subscribes to the subjects of jobs on the world's bus.
func (w *world) record(tb testing.TB, jobs ...string) *recorder {
	tb.Helper()
	r := &recorder{}
	for _, job := range jobs {
		sub, err := w.bus.Endpoint(job).Subscribe(job, func(m messaging.Message) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.got = append(r.got, received{At: w.elapsed(), To: job, Msg: m})
		})
		if err != nil {
			tb.Fatalf("subscribe %s: %v", job, err)
		}
		tb.Cleanup(func() { sub.Unsubscribe() })
	}
	return r
}

func (r *recorder) messages() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// newLogger returns a text logger (Info and up) writing to a new buffer.
func newLogger() (*slog.Logger, *testsupport.LogBuffer) {
	buf := &testsupport.LogBuffer{}
	return buf.Logger(slog.LevelInfo), buf
}
