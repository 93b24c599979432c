package messaging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// waitTimeout bounds every wait for a delivery; generous, since a pass never
// waits for it.
const waitTimeout = 10 * time.Second

// startNATS runs a real NATS server in the test process on a free port.
func startNATS(tb testing.TB) *server.Server {
	tb.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(waitTimeout) {
		s.Shutdown()
		tb.Fatal("nats server not ready")
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// connect opens a client connection to s, closed at the end of the test.
func connect(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect())
	if err != nil {
		tb.Fatalf("nats connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// newBus makes a bus over nc that logs nowhere unless opts say otherwise.
func newBus(tb testing.TB, nc *nats.Conn, opts ...option) *NATSBus {
	tb.Helper()
	all := append([]option{withLogger(slog.New(slog.DiscardHandler))}, opts...)
	b, err := newNATSBus(nc, all...)
	if err != nil {
		tb.Fatalf("NewNATSBus: %v", err)
	}
	return b
}

// subscribe subscribes bus to jobID, makes sure the server has the
// subscription, and returns the channel the handler feeds.
func subscribe(tb testing.TB, bus *NATSBus, nc *nats.Conn, jobID string) (<-chan Message, Subscription) {
	tb.Helper()
	ch := make(chan Message, 16)
	sub, err := bus.Subscribe(jobID, func(m Message) { ch <- m })
	if err != nil {
		tb.Fatalf("Subscribe(%q): %v", jobID, err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		tb.Fatalf("flush: %v", err)
	}
	return ch, sub
}

// receive waits for the next delivered message.
func receive(tb testing.TB, ch <-chan Message) Message {
	tb.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(waitTimeout):
		tb.Fatal("no message delivered")
		return Message{}
	}
}

// timerClock is a mock clock that reports every timer made on it, so a test
// knows when the code under test is waiting and can advance time then.
type timerClock struct {
	*clock.Mock
	timers chan time.Duration
}

func newTimerClock() *timerClock {
	return &timerClock{Mock: clock.NewMock(), timers: make(chan time.Duration, 16)}
}

func (c *timerClock) Timer(d time.Duration) *clock.Timer {
	t := c.Mock.Timer(d)
	c.timers <- d
	return t
}

// nextTimer waits until the code under test makes a timer and returns its
// duration.
func (c *timerClock) nextTimer(tb testing.TB) time.Duration {
	tb.Helper()
	select {
	case d := <-c.timers:
		return d
	case <-time.After(waitTimeout):
		tb.Fatal("no timer started")
		return 0
	}
}

// traffic returns st without the connection's events, which a test that
// closes its connection sees counted a moment later, on the callback
// goroutine of nats.go.
func traffic(st Stats) Stats {
	st.Disconnects, st.Reconnects, st.Closes = 0, 0, 0
	return st
}

// syncBuffer is a bytes.Buffer safe for a logger on another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNewNATSBus(t *testing.T) {
	nc := connect(t, startNATS(t))

	t.Run("nil connection", func(t *testing.T) {
		if _, err := newNATSBus(nil); err == nil {
			t.Fatal("newNATSBus(nil) succeeded")
		}
	})

	invalid := []struct {
		name string
		opt  option
	}{
		{"empty prefix", withPrefix("")},
		{"prefix with a star", withPrefix("CK*")},
		{"prefix ending in a dot", withPrefix("mygame.")},
		{"prefix with an empty token", withPrefix("mygame..CKHandoff")},
		{"prefix with a space", withPrefix("my game")},
		{"prefix wildcard token", withPrefix("mygame.>")},
		{"zero max bytes", withMaxBytes(0)},
		{"negative max bytes", withMaxBytes(-1)},
		{"nil clock", withClock(nil)},
		{"negative retry delay", withRetryDelay(-time.Millisecond)},
		{"nil logger", withLogger(nil)},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			b, err := newNATSBus(nc, tt.opt)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewNATSBus = %v, %v; want ErrInvalidConfig", b, err)
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		b, err := newNATSBus(nc)
		if err != nil {
			t.Fatal(err)
		}
		if b.opts.prefix != DefaultPrefix || b.opts.maxBytes != DefaultMaxBytes ||
			b.opts.retryDelay != defaultRetryDelay || b.opts.clock == nil || b.opts.logger == nil {
			t.Fatalf("defaults: %+v", b.opts)
		}
	})

	t.Run("valid options", func(t *testing.T) {
		b, err := newNATSBus(nc, withPrefix("mygame.CKHandoff"), withMaxBytes(4096),
			withRetryDelay(0), withClock(clock.NewMock()), withLogger(slog.Default()))
		if err != nil {
			t.Fatal(err)
		}
		if b.opts.prefix != "mygame.CKHandoff" || b.opts.maxBytes != 4096 || b.opts.retryDelay != 0 {
			t.Fatalf("options not applied: %+v", b.opts)
		}
	})
}

func TestSubject(t *testing.T) {
	nc := connect(t, startNATS(t))
	tests := []struct {
		name   string
		opts   []option
		jobID  string
		want   string
		wantOK bool
	}{
		{"default prefix", nil, "server-a", "CKHandoff.server-a", true},
		{"dotted prefix", []option{withPrefix("mygame.CKHandoff")}, "server-a", "mygame.CKHandoff.server-a", true},
		{"dot in job id", nil, "server.a", "", false},
		{"wildcard job id", nil, "*", "", false},
		{"empty job id", nil, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newBus(t, nc, tt.opts...).subject(tt.jobID)
			if tt.wantOK && (err != nil || got != tt.want) {
				t.Fatalf("Subject(%q) = %q, %v; want %q", tt.jobID, got, err, tt.want)
			}
			if !tt.wantOK && !errors.Is(err, errInvalidJobID) {
				t.Fatalf("Subject(%q) = %q, %v; want errInvalidJobID", tt.jobID, got, err)
			}
		})
	}
}

func TestPublishSubscribe(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	busA, busB := newBus(t, ncA), newBus(t, ncB)
	chA, _ := subscribe(t, busA, ncA, "server-a")
	chB, _ := subscribe(t, busB, ncB, "server-b")
	ctx := context.Background()

	req := Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b", Token: "tok"}
	if err := busB.Publish(ctx, "server-a", req); err != nil {
		t.Fatalf("publish request: %v", err)
	}
	if got := receive(t, chA); got != req {
		t.Fatalf("A received %+v, want %+v", got, req)
	}

	reply := Message{Type: TypeReply, Driver: req.Driver, Key: req.Key}
	if err := busA.Publish(ctx, req.Requester, reply); err != nil {
		t.Fatalf("publish reply: %v", err)
	}
	if got := receive(t, chB); got != reply {
		t.Fatalf("B received %+v, want %+v", got, reply)
	}

	if st := busB.Stats(); st.Published != 1 || st.Received != 1 || st.Dropped != 0 || st.PublishRetried != 0 {
		t.Fatalf("B stats %+v", st)
	}
	if st := busA.Stats(); st.Published != 1 || st.Received != 1 || st.Dropped != 0 {
		t.Fatalf("A stats %+v", st)
	}
}

func TestPublishUsesPrefix(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	raw := make(chan *nats.Msg, 1)
	if _, err := ncA.ChanSubscribe("mygame.CKHandoff.server-a", raw); err != nil {
		t.Fatal(err)
	}
	if err := ncA.Flush(); err != nil {
		t.Fatal(err)
	}
	bus := newBus(t, ncB, withPrefix("mygame.CKHandoff"))
	m := Message{Type: TypeReply, Driver: "PlayerData", Key: "user:1"}
	if err := bus.Publish(context.Background(), "server-a", m); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-raw:
		got, err := Decode(msg.Data, 0)
		if err != nil || got != m {
			t.Fatalf("raw subscriber got %+v, %v; want %+v", got, err, m)
		}
	case <-time.After(waitTimeout):
		t.Fatal("nothing on mygame.CKHandoff.server-a")
	}
}

func TestSubscribeDropsBadMessages(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	logs := &syncBuffer{}
	busA := newBus(t, ncA, withLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ch, _ := subscribe(t, busA, ncA, "server-a")
	subject, err := busA.subject("server-a")
	if err != nil {
		t.Fatal(err)
	}

	valid := Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42"}
	validBytes, err := Encode(valid)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		[]byte("garbage"),
		{},
		validBytes[:len(validBytes)-2],
		mustMarshal(t, []string{"R", "PlayerData", "user:42"}),
		mustMarshal(t, map[string]any{"T": "R", "D": 1, "K": "k"}),
		mustMarshal(t, map[string]any{"T": "Z", "D": "d", "K": "k"}),
		bytes.Repeat([]byte{0x90}, DefaultMaxBytes+1),
	}
	for _, b := range bad {
		if err := ncB.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := ncB.Publish(subject, validBytes); err != nil {
		t.Fatal(err)
	}

	// NATS keeps one publisher's order, so the drops are counted before the
	// valid message reaches the handler.
	if got := receive(t, ch); got != valid {
		t.Fatalf("delivered %+v, want %+v", got, valid)
	}
	want := Stats{Received: 8, Dropped: 7, DroppedMalformed: 5, DroppedTooLarge: 1, DroppedUnknownType: 1}
	if st := busA.Stats(); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if n := strings.Count(logs.String(), "level=DEBUG msg=\"messaging: dropped message\""); n != 7 {
		t.Fatalf("%d drops logged at debug, want 7:\n%s", n, logs)
	}
	select {
	case m := <-ch:
		t.Fatalf("unexpected delivery %+v", m)
	default:
	}
}

func TestInvalidJobIDRefused(t *testing.T) {
	nc := connect(t, startNATS(t))
	bus := newBus(t, nc)
	m := Message{Type: TypeReply, Driver: "D", Key: "K"}
	for _, jobID := range []string{"", "a.b", "*", ">", "a b", strings.Repeat("x", maxJobIDBytes+1)} {
		t.Run(jobID, func(t *testing.T) {
			if err := bus.Publish(context.Background(), jobID, m); !errors.Is(err, errInvalidJobID) {
				t.Fatalf("Publish to %q: %v, want errInvalidJobID", jobID, err)
			}
			sub, err := bus.Subscribe(jobID, func(Message) {})
			if !errors.Is(err, errInvalidJobID) || sub != nil {
				t.Fatalf("Subscribe(%q) = %v, %v; want errInvalidJobID", jobID, sub, err)
			}
		})
	}
	if st := bus.Stats(); st != (Stats{}) {
		t.Fatalf("refused calls counted: %+v", st)
	}
}

func TestPublishRefusesBadMessages(t *testing.T) {
	nc := connect(t, startNATS(t))
	bus := newBus(t, nc, withMaxBytes(64))
	tests := []struct {
		name string
		m    Message
		want error
	}{
		{"missing key", Message{Type: TypeReply, Driver: "D"}, ErrMalformed},
		{"unknown type", Message{Type: "X", Driver: "D", Key: "K"}, ErrUnknownType},
		{"invalid requester", Message{Type: TypeRequest, Driver: "D", Key: "K", Requester: "a.b"}, errInvalidJobID},
		{"over the bus limit", Message{Type: TypeReply, Driver: "D", Key: strings.Repeat("k", 64)}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := bus.Publish(context.Background(), "server-a", tt.m); !errors.Is(err, tt.want) {
				t.Fatalf("Publish: %v, want %v", err, tt.want)
			}
		})
	}
	if st := bus.Stats(); st != (Stats{}) {
		t.Fatalf("refused publishes counted: %+v", st)
	}
}

func TestPublishCancelledContext(t *testing.T) {
	nc := connect(t, startNATS(t))
	bus := newBus(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := bus.Publish(ctx, "server-a", Message{Type: TypeReply, Driver: "D", Key: "K"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled ctx: %v, want context.Canceled", err)
	}
	if st := bus.Stats(); st != (Stats{}) {
		t.Fatalf("stats %+v, want nothing published", st)
	}
}

func TestPublishClosedConnRetriesOnce(t *testing.T) {
	nc := connect(t, startNATS(t))
	clk := newTimerClock()
	logs := &syncBuffer{}
	bus := newBus(t, nc, withClock(clk), withLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	nc.Close()
	m := Message{Type: TypeReply, Driver: "D", Key: "K"}

	for i := range 2 {
		done := make(chan error, 1)
		go func() { done <- bus.Publish(context.Background(), "server-a", m) }()

		if d := clk.nextTimer(t); d != defaultRetryDelay {
			t.Fatalf("retry waits %v, want %v", d, defaultRetryDelay)
		}
		clk.Add(defaultRetryDelay - time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Publish returned %v before the retry delay passed", err)
		default:
		}
		clk.Add(time.Millisecond)

		var err error
		select {
		case err = <-done:
		case <-time.After(waitTimeout):
			t.Fatal("Publish did not return after the retry delay")
		}
		if !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("Publish: %v, want nats.ErrConnectionClosed", err)
		}
		if !strings.Contains(err.Error(), "publish to CKHandoff.server-a") {
			t.Fatalf("error %q does not name the subject", err)
		}
		select {
		case d := <-clk.timers:
			t.Fatalf("a second retry was scheduled (%v)", d)
		default:
		}
		want := Stats{PublishRetried: uint64(i + 1), PublishFailed: uint64(i + 1)}
		if st := traffic(bus.Stats()); st != want {
			t.Fatalf("stats %+v, want %+v", st, want)
		}
	}

	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for two failed publishes, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "level=DEBUG msg=\"messaging: publish failed"); n != 1 {
		t.Fatalf("%d debug lines for the second failure, want 1:\n%s", n, out)
	}
}

func TestPublishRetryHonoursContext(t *testing.T) {
	nc := connect(t, startNATS(t))
	clk := newTimerClock()
	bus := newBus(t, nc, withClock(clk))
	nc.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.Publish(ctx, "server-a", Message{Type: TypeReply, Driver: "D", Key: "K"}) }()
	clk.nextTimer(t)
	cancel()

	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Publish: %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Publish did not return when its ctx was cancelled")
	}
	if st := traffic(bus.Stats()); st != (Stats{PublishRetried: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestPublishRetrySucceeds(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	busA := newBus(t, ncA)
	ch, _ := subscribe(t, busA, ncA, "server-a")

	clk := newTimerClock()
	logs := &syncBuffer{}
	busB := newBus(t, ncB, withClock(clk), withRetryDelay(time.Second),
		withLogger(slog.New(slog.NewTextHandler(logs, nil))))
	var attempts int // only the Publish goroutine touches it until done
	busB.publish = func(subject string, data []byte) error {
		attempts++
		if attempts == 1 {
			return errors.New("injected failure")
		}
		return ncB.Publish(subject, data)
	}

	m := Message{Type: TypeRequest, Driver: "PlayerData", Key: "user:42", Requester: "server-b"}
	done := make(chan error, 1)
	go func() { done <- busB.Publish(context.Background(), "server-a", m) }()
	if d := clk.nextTimer(t); d != time.Second {
		t.Fatalf("retry waits %v, want 1s", d)
	}
	clk.Add(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Publish did not return")
	}
	if attempts != 2 {
		t.Fatalf("%d attempts, want 2", attempts)
	}
	if got := receive(t, ch); got != m {
		t.Fatalf("delivered %+v, want %+v", got, m)
	}
	if st := busB.Stats(); st != (Stats{Published: 1, PublishRetried: 1}) {
		t.Fatalf("stats %+v", st)
	}
	if logs.String() != "" {
		t.Fatalf("a publish that succeeded on its retry logged:\n%s", logs)
	}
}

func TestPublishRetryRealClock(t *testing.T) {
	nc := connect(t, startNATS(t))
	bus := newBus(t, nc, withRetryDelay(time.Millisecond))
	nc.Close()
	err := bus.Publish(context.Background(), "server-a", Message{Type: TypeReply, Driver: "D", Key: "K"})
	if !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Publish: %v, want nats.ErrConnectionClosed", err)
	}
	if st := traffic(bus.Stats()); st != (Stats{PublishRetried: 1, PublishFailed: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestUnsubscribe(t *testing.T) {
	s := startNATS(t)
	ncA, ncB := connect(t, s), connect(t, s)
	busA, busB := newBus(t, ncA), newBus(t, ncB)
	ch1, sub1 := subscribe(t, busA, ncA, "server-a")
	ch2, sub2 := subscribe(t, busA, ncA, "server-a")

	for i := range 2 {
		if err := sub1.Unsubscribe(); err != nil {
			t.Fatalf("Unsubscribe #%d: %v", i+1, err)
		}
	}
	if err := ncA.Flush(); err != nil {
		t.Fatal(err)
	}

	m := Message{Type: TypeReply, Driver: "D", Key: "K"}
	if err := busB.Publish(context.Background(), "server-a", m); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ch2); got != m {
		t.Fatalf("second subscription got %+v", got)
	}
	select {
	case got := <-ch1:
		t.Fatalf("unsubscribed handler got %+v", got)
	default:
	}

	ncA.Close()
	if err := sub2.Unsubscribe(); err != nil {
		t.Fatalf("Unsubscribe on a closed connection: %v", err)
	}
}

func TestSubscribeErrors(t *testing.T) {
	nc := connect(t, startNATS(t))
	bus := newBus(t, nc)
	if _, err := bus.Subscribe("server-a", nil); err == nil {
		t.Fatal("Subscribe with a nil handler succeeded")
	}
	nc.Close()
	_, err := bus.Subscribe("server-a", func(Message) {})
	if !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Subscribe on a closed connection: %v, want nats.ErrConnectionClosed", err)
	}
}
