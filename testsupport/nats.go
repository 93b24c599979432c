package testsupport

import (
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsReadyWithin bounds how long StartNATS waits for the embedded server to
// accept connections; it is ready in milliseconds, so this only catches a hang.
const natsReadyWithin = 10 * time.Second

// NATS is a NATS server for one test.
type NATS struct {
	// URL is the address clients connect to ("nats://127.0.0.1:port", or
	// NATS_URL when that is set).
	URL string
	// Server is the embedded server, or nil when NATS_URL is used.
	Server *server.Server
}

// StartNATS gives a test a NATS server: the one at NATS_URL when that is set,
// else a real nats-server running inside the test process on a random
// 127.0.0.1 port, without logging or signal handlers. It returns once the
// server accepts connections and shuts it down when the test ends.
func StartNATS(tb testing.TB) *NATS {
	tb.Helper()
	if url := os.Getenv("NATS_URL"); url != "" {
		nc, err := nats.Connect(url, nats.Name(tb.Name()+" probe"))
		if err != nil {
			tb.Fatalf("testsupport: NATS_URL %q: %v", url, err)
		}
		nc.Close()
		return &NATS{URL: url}
	}
	return StartOwnNATS(tb)
}

// StartOwnNATS gives a test a NATS server of its own, whatever NATS_URL
// says: a real nats-server running inside the test process on a random
// 127.0.0.1 port, as StartNATS starts without NATS_URL. A test that needs
// two buses that do not reach each other starts two.
func StartOwnNATS(tb testing.TB) *NATS {
	tb.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:   "127.0.0.1",
		Port:   server.RANDOM_PORT,
		NoLog:  true,
		NoSigs: true,
	})
	if err != nil {
		tb.Fatalf("testsupport: new nats-server: %v", err)
	}
	tb.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	srv.Start()
	if !srv.ReadyForConnections(natsReadyWithin) {
		tb.Fatalf("testsupport: nats-server not ready within %v", natsReadyWithin)
	}
	return &NATS{URL: srv.ClientURL(), Server: srv}
}

// Connect opens a new connection to n, named after the test unless opts name
// it, and closes it when the test ends (before the server stops, when both
// were made by the same test). Each simulated game server should get its own.
func (n *NATS) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	opts = append([]nats.Option{nats.Name(tb.Name())}, opts...)
	nc, err := nats.Connect(n.URL, opts...)
	if err != nil {
		tb.Fatalf("testsupport: connect to NATS %s: %v", n.URL, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}
