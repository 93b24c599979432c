package datadriver_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/internal/tradescript"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// player is the profile type of these tests.
type player struct {
	Coins int
	Items map[string]int
	Name  string
}

// server is one simulated game server: a Node with its own Redis client.
type server struct {
	node   *datadriver.Node
	rdb    redis.UniversalClient
	prdb   redis.UniversalClient // its presence client
	faults *testsupport.FaultHook
	logs   *testsupport.LogBuffer
}

// newServer starts a Node named job on r, closed at cleanup.
func newServer(tb testing.TB, r *testsupport.Redis, job string, opts ...func(*datadriver.NodeConfig)) *server {
	tb.Helper()
	s := &server{rdb: r.Client(tb), faults: &testsupport.FaultHook{}, logs: &testsupport.LogBuffer{}}
	s.rdb.AddHook(s.faults)
	// Beats go through a client of their own, with the same fault hook:
	// a test that fails or hangs the server's calls fails its beats too.
	prdb := r.Client(tb)
	prdb.AddHook(s.faults)
	s.prdb = prdb
	cfg := datadriver.NodeConfig{
		JobID:         job,
		Redis:         s.rdb,
		PresenceRedis: prdb,
		Namespace:     r.Namespace,
		Logger:        slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := datadriver.NewNode(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("NewNode: %v", err)
	}
	s.node = n
	tb.Cleanup(func() {
		s.faults.Clear()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return s
}

// players creates the player driver on s.
func players(tb testing.TB, s *server, opts ...func(*datadriver.Config[player])) *datadriver.Driver[player] {
	tb.Helper()
	cfg := datadriver.Config[player]{
		Name:     "PlayerData",
		Defaults: player{Coins: 100, Items: map[string]int{"starter-sword": 1}},
		LockWait: 2 * time.Second,
		Autosave: -1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := datadriver.NewDriver(s.node, cfg)
	if err != nil {
		tb.Fatalf("NewDriver: %v", err)
	}
	return d
}

// awaitEnd waits, at most 5 s, for p's session to end. A joiner can take a
// lock the moment its holder's release lands, before the holder has read the
// script's answer and ended its session: a test reads a former holder's Err
// only after this.
func awaitEnd(tb testing.TB, p *datadriver.Profile[player]) {
	tb.Helper()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		tb.Fatal("the session did not end within 5s of its release landing")
	}
}

// awaitHandedOff waits for p's session to end and for the Kick that k
// counts for a handoff (the Kick is delivered on the driver's dispatcher,
// after the end).
func awaitHandedOff(tb testing.TB, p *datadriver.Profile[player], k *kicks) {
	tb.Helper()
	awaitEnd(tb, p)
	eventually(tb, 5*time.Second, "the former holder's Kick", func() bool { return k.joined.Load() >= 1 })
}

// eventually polls cond until it holds or the deadline passes.
func eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestAnswered checks that s sent a release request and that the
// holder's reply reached it. The reply may still be on its way when s's join
// returned, or reach s after its join retook the lock (its park ended first,
// once the release had landed): s then drops it as unwaited.
func requestAnswered(tb testing.TB, s *server) {
	tb.Helper()
	eventually(tb, 5*time.Second, "the holder's reply reaches "+s.node.JobID(), func() bool {
		st := s.node.HandoffStats()
		return st.RepliesReceived+st.DroppedUnwaited > 0
	})
	if st := s.node.HandoffStats(); st.RequestsSent == 0 {
		tb.Fatalf("%s's handoff stats %+v: want a request sent", s.node.JobID(), st)
	}
}

// recordFields reads fields of key's record straight from Redis.
func recordFields(tb testing.TB, r *testsupport.Redis, driver, key string) map[string]string {
	tb.Helper()
	c := r.Client(tb)
	m, err := c.HGetAll(context.Background(), record.Key(r.Namespace, driver, key)).Result()
	if err != nil {
		tb.Fatalf("HGETALL: %v", err)
	}
	return m
}

// isWrite reports whether cmd is a save.lua call in mode ("save",
// "release" or "settle").
func isWrite(cmd redis.Cmder, mode string) bool {
	in, ok := testsupport.Identify(cmd)
	if !ok || in.Script != record.ScriptSave {
		return false
	}
	a, err := record.ParseSaveArgs(in.Args)
	return err == nil && string(a.Mode) == mode
}

// isScript reports whether cmd runs the project's script name.
func isScript(cmd redis.Cmder, name string) bool {
	in, ok := testsupport.Identify(cmd)
	return ok && in.Script == name
}

// writeKey is the record key a save.lua command writes.
func writeKey(cmd redis.Cmder) string {
	k, _ := testsupport.ScriptKey(cmd, 1)
	return k
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func coins(p *datadriver.Profile[player]) int {
	var c int
	p.View(func(d *player) { c = d.Coins })
	return c
}

// holdFirst pauses the first command of s that match selects, before it is
// sent: in is closed once it is waiting; proceed lets it (and everything
// after it) go.
func holdFirst(s *server, match func(cmd redis.Cmder) bool) (in <-chan struct{}, proceed func()) {
	inCh, go_ := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if match(cmd) {
			held := false
			once.Do(func() { held = true })
			if held {
				close(inCh)
				<-go_
			}
		}
		return nil
	})
	return inCh, func() { close(go_) }
}

// isCommit matches the trade journal's commit.
func isCommit(cmd redis.Cmder) bool {
	in, ok := testsupport.Identify(cmd)
	if !ok || in.Script != tradescript.NameMove {
		return false
	}
	a, err := tradescript.ParseMoveArgs(in.Args)
	return err == nil && a.To == string(tradejournal.Committed)
}

// pair is two servers A and B on one Redis and one NATS, with the fast
// handoff timings, for handoff tests.
type pair struct {
	r    *testsupport.Redis
	n    *testsupport.NATS
	a, b *server
}

func newPair(t *testing.T, opts ...func(*datadriver.NodeConfig)) *pair {
	t.Helper()
	p := &pair{r: testsupport.StartRedis(t), n: testsupport.StartNATS(t)}
	p.a = newServer(t, p.r, "server-a", append([]func(*datadriver.NodeConfig){fast, withNATS(t, p.n)}, opts...)...)
	p.b = newServer(t, p.r, "server-b", append([]func(*datadriver.NodeConfig){fast, withNATS(t, p.n)}, opts...)...)
	return p
}

// joinAsync starts a Join of key on d; the channel gets the profile (nil on
// error, which is reported).
func joinAsync(t *testing.T, ctx context.Context, d *datadriver.Driver[player], key string) <-chan *datadriver.Profile[player] {
	t.Helper()
	joined := make(chan *datadriver.Profile[player], 1)
	go func() {
		p, err := d.Join(ctx, key)
		if err != nil {
			t.Errorf("join %s: %v", key, err)
		}
		joined <- p
	}()
	return joined
}

func msgpackMarshal(v any) ([]byte, error)   { return msgpack.Marshal(v) }
func msgpackUnmarshal(b []byte, v any) error { return msgpack.Unmarshal(b, v) }

// byAge gives a driver short locks without the presence flag: they go by
// age, once older than ttl + skew (LockTTL, LockSkew).
func byAge(ttl, skew time.Duration) func(*datadriver.Config[player]) {
	return func(c *datadriver.Config[player]) {
		c.LockTTL, c.LockSkew = ttl, skew
		datadriver.WithoutHandoff(c)
	}
}

// fencedAlready fails t unless a's session has ended, fenced, by now: when
// another server has just taken its lock by age (else it fails with live).
func fencedAlready(t *testing.T, a *datadriver.Profile[player], live string) {
	t.Helper()
	select {
	case <-a.Done():
	default:
		t.Fatal(live)
	}
	if !errors.Is(a.Err(), datadriver.ErrFenced) {
		t.Fatalf("A's Err = %v, want ErrFenced", a.Err())
	}
}
