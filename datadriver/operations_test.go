package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// Close: Closing closes at once, joins answer ErrClosing, live sessions are
// kicked for the shutdown, and every profile is saved and released.
func TestShutdown(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	var mu sync.Mutex
	kicked := map[string]datadriver.KickReason{}
	d := players(t, s, func(c *datadriver.Config[player]) {
		c.Kick = func(key string, reason datadriver.KickReason) { mu.Lock(); kicked[key] = reason; mu.Unlock() }
	})
	ctx := ctxT(t)
	var ps []*datadriver.Profile[player]
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		p, err := d.Join(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 77 })
		ps = append(ps, p)
	}
	select {
	case <-s.node.Closing():
		t.Fatal("Closing closed before Close")
	default:
	}
	if err := s.node.Healthy(); err != nil {
		t.Fatalf("Healthy = %v before Close", err)
	}
	if err := s.node.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-s.node.Closing():
	default:
		t.Fatal("Closing not closed after Close")
	}
	if err := s.node.Healthy(); !errors.Is(err, datadriver.ErrClosing) {
		t.Fatalf("Healthy after Close = %v, want ErrClosing", err)
	}
	if _, err := d.Join(ctx, "user:4"); !errors.Is(err, datadriver.ErrClosing) || !errors.Is(err, datadriver.ErrClosed) {
		t.Fatalf("Join after Close = %v, want ErrClosing (and ErrClosed)", err)
	}
	for _, p := range ps {
		if !errors.Is(p.Err(), datadriver.ErrReleased) {
			t.Errorf("%s: Err = %v, want ErrReleased", p.Key(), p.Err())
		}
		if rec := recordFields(t, r, "PlayerData", p.Key()); rec["lock.token"] != "" {
			t.Errorf("%s still locked after Close", p.Key())
		}
		if got := storedPlayer(t, r, p.Key()); got.Coins != 77 {
			t.Errorf("%s: stored coins %d, want 77 (saved by Close)", p.Key(), got.Coins)
		}
		mu.Lock()
		reason := kicked[p.Key()]
		mu.Unlock()
		if reason != datadriver.ReasonShutdown {
			t.Errorf("%s kicked with %v, want ReasonShutdown", p.Key(), reason)
		}
	}
}

// storedPlayer decodes key's stored data.
func storedPlayer(tb testing.TB, r *testsupport.Redis, key string) player {
	tb.Helper()
	var p player
	if raw := recordFields(tb, r, "PlayerData", key)["data"]; raw != "" {
		if err := msgpackUnmarshal([]byte(raw), &p); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// Healthy says when a Node cannot take players: its presence lease lapsed
// (Redis does not answer its beats).
func TestHealthyWithoutALease(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a", fast)
	if err := s.node.Healthy(); err != nil {
		t.Fatalf("Healthy = %v", err)
	}
	s.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
	eventually(t, 5*time.Second, "the lease lapses", func() bool { return errors.Is(s.node.Healthy(), datadriver.ErrFenced) })
	s.faults.Clear()
	eventually(t, 5*time.Second, "a new lease", func() bool { return s.node.Healthy() == nil })
}

// With RequestKey the servers hand profiles over as before; a server with
// another key can no longer end a session.
func TestRequestKey(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	withKey := func(k []byte) func(*datadriver.NodeConfig) {
		return func(c *datadriver.NodeConfig) { c.RequestKey = k }
	}
	a := newServer(t, r, "server-a", fast, withNATS(t, n), withKey(key))
	b := newServer(t, r, "server-b", fast, withNATS(t, n), withKey(key))
	c := newServer(t, r, "server-c", fast, withNATS(t, n), withKey([]byte("another key, 32 bytes long......")))
	da := players(t, a)
	db := players(t, b)
	dc := players(t, c, func(cfg *datadriver.Config[player]) { cfg.LockWait = 300 * time.Millisecond })
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:5")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Join(ctx, "user:5"); !errors.Is(err, datadriver.ErrWaitTimeout) {
		t.Fatalf("a join from a server with another key = %v, want ErrWaitTimeout (its requests are dropped)", err)
	}
	if pa.Err() != nil {
		t.Fatalf("A's session ended on a request it could not authenticate: %v", pa.Err())
	}
	if _, err := db.Join(ctx, "user:5"); err != nil {
		t.Fatalf("a join from a server with the key: %v", err)
	}
	awaitEnd(t, pa)
	if !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Fatalf("A's session after B asked: %v, want ErrReleased", pa.Err())
	}
	if _, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "x", Redis: r.Client(t), NATS: n.Connect(t),
		RequestKey: []byte("short")}); !errors.Is(err, datadriver.ErrInvalidConfig) {
		t.Fatalf("a 5-byte RequestKey: %v, want ErrInvalidConfig", err)
	}
	// A server with a key says nothing of authentication (one without says
	// it once per process: TestUnauthenticatedWarnOncePerProcess).
	if strings.Contains(a.logs.String(), unauthenticatedWarning) {
		t.Errorf("a server with a RequestKey warned %q", unauthenticatedWarning)
	}
}

// The Node reports metrics and spans to the providers it is given: a
// handoff across two servers is one trace.
func TestTelemetry(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	otel := func(c *datadriver.NodeConfig) { c.MeterProvider, c.TracerProvider = mp, tp }
	a := newServer(t, r, "server-a", fast, withNATS(t, n), otel)
	b := newServer(t, r, "server-b", fast, withNATS(t, n), otel)
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	if _, err := da.Join(ctx, "user:6"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Join(ctx, "user:6"); err != nil { // a handoff
		t.Fatal(err)
	}

	if err := db.Wipe(ctx, "user:6"); err != nil { // a lock loss, reason wiped
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	eventually(t, 5*time.Second, "a lock loss counted as wiped", func() bool {
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		return lossCount(rm, "wiped") == 1
	})
	if n := lossCount(rm, "taken"); n != 0 {
		t.Errorf("%d lock losses counted as taken, want 0 (the only loss was a wipe)", n)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
		}
	}
	for _, name := range []string{"playerdata.join.duration", "playerdata.write.duration", "playerdata.profiles",
		"playerdata.handoff.sent", "playerdata.handoff.received"} {
		if !seen[name] {
			t.Errorf("no %s among %v", name, seen)
		}
	}

	var joinTrace, releaseTrace string
	eventually(t, 5*time.Second, "the spans end", func() bool {
		joinTrace, releaseTrace = "", ""
		for _, s := range spans.GetSpans() {
			switch {
			case s.Name == "join PlayerData" && joinTrace == "" && hasAttr(s, "playerdata.join.path", "handoff"):
				joinTrace = s.SpanContext.TraceID().String()
			case s.SpanKind.String() == "consumer" && s.Name != "":
				if releaseTrace == "" {
					releaseTrace = s.SpanContext.TraceID().String()
				}
			}
		}
		return joinTrace != "" && releaseTrace != ""
	})
	if joinTrace != releaseTrace {
		t.Errorf("the holder's processing of the request is in trace %s, the join in %s: want one trace", releaseTrace, joinTrace)
	}
}

// lossCount is the playerdata.lock.losses count with reason in rm.
func lossCount(rm metricdata.ResourceMetrics, reason string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != "playerdata.lock.losses" || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, ok := dp.Attributes.Value("playerdata.loss.reason"); ok && v.AsString() == reason {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// hasAttr reports whether span s has attribute key = value.
func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

// A clean deploy is quiet: a server holding 200 players is closed (as on
// SIGTERM) while another server joins all of them; every player arrives
// with its data, and the closing server's log has no warning, because
// nothing went wrong. An unclean one (Redis gone during the close) still
// says so.
func TestCleanDeployLogsNoWarning(t *testing.T) {
	// Presence at a pace that 200 joins under the race detector on a busy
	// machine cannot starve: a lapse here would be a warning of its own.
	pr := newPair(t, func(c *datadriver.NodeConfig) {
		c.Beat, c.PresenceTTL, c.FenceMargin = 500*time.Millisecond, 5*time.Second, 500*time.Millisecond
	})
	da := players(t, pr.a)
	db := players(t, pr.b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	ctx := ctxT(t)
	const n = 200
	for i := range n {
		p, err := da.Join(ctx, fmt.Sprintf("user:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(pl *player) { pl.Coins = i })
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := db.Join(ctx, fmt.Sprintf("user:%d", i))
			if err != nil {
				t.Errorf("B's join of user:%d: %v", i, err)
				return
			}
			if coins(p) != i {
				t.Errorf("user:%d arrived with coins %d, want %d", i, coins(p), i)
			}
		})
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	before := len(pr.a.logs.String()) // what it said at its start (NewNode's advice) is not the deploy's
	if err := pr.a.node.Close(cctx); err != nil {
		t.Errorf("Close = %v", err)
	}
	wg.Wait()
	for _, line := range strings.Split(pr.a.logs.String()[before:], "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("the clean deploy logged: %s", line)
		}
	}
}

// An unclean deploy still says so: a server whose Redis is gone when it is
// closed logs, by key, each profile it could not save and release.
func TestUncleanCloseLogsEachProfile(t *testing.T) {
	pr := newPair(t, func(c *datadriver.NodeConfig) { c.SaveTimeout = 300 * time.Millisecond })
	da := players(t, pr.a)
	ctx := ctxT(t)
	for _, key := range []string{"user:1", "user:2"} {
		if _, err := da.Join(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	pr.a.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pr.a.node.Close(cctx); err == nil {
		t.Error("Close with Redis gone reported success")
	}
	logs := pr.a.logs.String()
	for _, key := range []string{"user:1", "user:2"} {
		if !strings.Contains(logs, "could not save and release a profile") || !strings.Contains(logs, "key="+key) {
			t.Errorf("the unclean close did not name %s:\n%s", key, logs)
		}
	}
}
