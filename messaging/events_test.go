package messaging

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// eventWait bounds every wait for a connection event; generous, since a
// pass never waits for it.
const eventWait = 20 * time.Second

// appHandlers are the connection handlers an application set before it made
// the bus; each call is sent on its channel.
type appHandlers struct {
	disconnected, reconnected, closed chan struct{}
}

func newAppHandlers() *appHandlers {
	return &appHandlers{
		disconnected: make(chan struct{}, 8),
		reconnected:  make(chan struct{}, 8),
		closed:       make(chan struct{}, 8),
	}
}

// options sets the handlers; deprecated uses the old DisconnectedCB form.
func (a *appHandlers) options(deprecated bool) []nats.Option {
	disconnect := nats.DisconnectErrHandler(func(*nats.Conn, error) { a.disconnected <- struct{}{} })
	if deprecated {
		disconnect = nats.DisconnectHandler(func(*nats.Conn) { a.disconnected <- struct{}{} }) //nolint:staticcheck // the deprecated form is what this case tests
	}
	return []nats.Option{
		disconnect,
		nats.ReconnectHandler(func(*nats.Conn) { a.reconnected <- struct{}{} }),
		nats.ClosedHandler(func(*nats.Conn) { a.closed <- struct{}{} }),
	}
}

// await waits for one call of an application handler. The bus's handler
// runs before it, so the bus has counted and logged the event by then.
func await(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(eventWait):
		tb.Fatalf("the application's %s handler was not called", what)
	}
}

// connect2 opens a plain connection to url, closed when the test ends.
func connect2(tb testing.TB, url string) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// events returns the connection counters of st.
func events(st Stats) [3]uint64 { return [3]uint64{st.Disconnects, st.Reconnects, st.Closes} }

// TestConnEventsKillRestart kills and restarts a real nats-server process
// under a subscribed bus and checks that each event is counted, logged at its
// level, and still reaches the handler the application set, and that the
// subscription works again after the reconnect.
func TestConnEventsKillRestart(t *testing.T) {
	for _, deprecated := range []bool{false, true} {
		name := "DisconnectErrHandler"
		if deprecated {
			name = "deprecated DisconnectHandler"
		}
		t.Run(name, func(t *testing.T) {
			srv := startNATSProcess(t)
			app := newAppHandlers()
			nc, err := nats.Connect(srv.URL(), append(app.options(deprecated),
				nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			logs := &syncBuffer{}
			bus, err := newNATSBus(nc, withLogger(slog.New(slog.NewTextHandler(logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan Message, 4)
			if _, err := bus.Subscribe("server-a", func(m Message) { got <- m }); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}

			srv.Kill()
			await(t, app.disconnected, "disconnect")
			if e := events(bus.Stats()); e != [3]uint64{1, 0, 0} {
				t.Fatalf("after the kill: disconnects, reconnects, closes = %v, want [1 0 0]", e)
			}
			if strings.Count(logs.String(), "level=WARN msg=\"messaging: NATS disconnected") != 1 {
				t.Fatalf("disconnect not logged at Warn:\n%s", logs)
			}

			srv.Restart(t)
			await(t, app.reconnected, "reconnect")
			if e := events(bus.Stats()); e != [3]uint64{1, 1, 0} {
				t.Fatalf("after the restart: %v, want [1 1 0]", e)
			}
			if strings.Count(logs.String(), "level=INFO msg=\"messaging: NATS reconnected") != 1 {
				t.Fatalf("reconnect not logged at Info:\n%s", logs)
			}

			// nats.go resubscribed: a message reaches the handler again.
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			sender := newBus(t, connect2(t, srv.URL()))
			m := Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42", Sender: "server-b"}
			if err := sender.Publish(context.Background(), "server-a", m); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-got:
				if r != m {
					t.Fatalf("received %+v, want %+v", r, m)
				}
			case <-time.After(eventWait):
				t.Fatal("no delivery after the reconnect")
			}

			// Closed under a live subscription: an error, counted once (the
			// disconnect nats.go reports with it is not a second event).
			nc.Close()
			await(t, app.closed, "closed")
			if e := events(bus.Stats()); e != [3]uint64{1, 1, 1} {
				t.Fatalf("after the close: %v, want [1 1 1]", e)
			}
			if strings.Count(logs.String(), "level=ERROR msg=\"messaging: NATS connection closed") != 1 {
				t.Fatalf("close under a live subscription not logged at Error:\n%s", logs)
			}
			select {
			case <-app.disconnected: // the close's disconnect reached the application
			case <-time.After(eventWait):
				t.Fatal("the application did not see the disconnect of the close")
			}
		})
	}
}

// TestConnCloseAfterUnsubscribe is the clean shutdown: the handoff
// unsubscribes, then the application closes its connection, which is logged
// at Info only. Two buses on one connection each count the close, and the
// application's handler still runs once.
func TestConnCloseAfterUnsubscribe(t *testing.T) {
	s := startNATS(t)
	app := newAppHandlers()
	nc, err := nats.Connect(s.ClientURL(), app.options(false)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	first, err := newNATSBus(nc, withLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	second, err := newNATSBus(nc, withLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := first.Subscribe("server-a", func(Message) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	nc.Close()
	await(t, app.closed, "closed")
	select {
	case <-app.closed:
		t.Fatal("the application's closed handler ran twice")
	default:
	}
	for name, bus := range map[string]*NATSBus{"first": first, "second": second} {
		if e := events(bus.Stats()); e != [3]uint64{0, 0, 1} {
			t.Fatalf("%s bus: disconnects, reconnects, closes = %v, want [0 0 1]", name, e)
		}
	}
	if c := strings.Count(logs.String(), "level=INFO msg=\"messaging: NATS connection closed\""); c != 2 {
		t.Fatalf("%d Info lines for the clean close of two buses, want 2:\n%s", c, logs)
	}
	if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a clean close logged a warning or an error:\n%s", logs)
	}
	if _, err := first.Subscribe("server-a", func(Message) {}); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Subscribe after the close: %v", err)
	}
}

// TestConnLostForGood is a connection that does not reconnect: the server's
// death closes it, which is logged at Error even with nothing subscribed,
// since it ended on an error, and counted as a close only.
func TestConnLostForGood(t *testing.T) {
	srv := startNATSProcess(t)
	app := newAppHandlers()
	nc, err := nats.Connect(srv.URL(), append(app.options(false), nats.NoReconnect())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	logs := &syncBuffer{}
	bus := newBus(t, nc, withLogger(slog.New(slog.NewTextHandler(logs, nil))))

	srv.Kill()
	await(t, app.closed, "closed")
	if e := events(bus.Stats()); e != [3]uint64{0, 0, 1} {
		t.Fatalf("disconnects, reconnects, closes = %v, want [0 0 1]", e)
	}
	if c := strings.Count(logs.String(), "level=ERROR msg=\"messaging: NATS connection closed"); c != 1 {
		t.Fatalf("a connection lost for good not logged at Error once:\n%s", logs)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the close was also logged as a disconnect:\n%s", logs)
	}
}
