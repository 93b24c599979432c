package datadriver_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// A presence client on another redis-server, or on another DB of the same
// one, is refused by NewNode with ErrInvalidConfig naming both clients:
// before the check, such a Node beat where no peer reads, and a peer took
// its live players (8 of 8 in 1.5 s) while it played on. The JobID claim
// goes through the proof, so a misconfigured second process with a live
// server's JobID never claims it elsewhere.
func TestPresenceAndRecordsOnOneDataset(t *testing.T) {
	r1, r2 := testsupport.StartOwnRedis(t), testsupport.StartOwnRedis(t)
	ctx := context.Background()
	rec := r1.Client(t)
	start := func(job string, pres redis.UniversalClient) (*datadriver.Node, error) {
		return datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: job, Redis: rec, PresenceRedis: pres,
			Namespace: r1.Namespace, Beat: 100 * time.Millisecond, PresenceTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
	}
	live, err := start("server-a", r1.Client(t))
	if err != nil {
		t.Fatalf("NewNode with presence on the records' Redis and DB: %v", err)
	}
	t.Cleanup(func() { _ = live.Close(context.Background()) })
	for _, tc := range []struct {
		name string
		pres redis.UniversalClient
		want []string
	}{
		{"another redis-server", r2.Client(t), []string{"redis " + r2.Addr + " db 0", "redis " + r1.Addr + " db 0"}},
		{"DB 1 of the same redis-server", r1.Client(t, func(o *redis.Options) { o.DB = 1 }),
			[]string{"redis " + r1.Addr + " db 1", "redis " + r1.Addr + " db 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, job := range []string{"server-b", "server-a"} { // a new JobID, and the live server's
				n, err := start(job, tc.pres)
				if err == nil {
					_ = n.Close(ctx)
					t.Fatalf("NewNode(%s) accepted a presence client on %s", job, tc.name)
				}
				if !errors.Is(err, datadriver.ErrInvalidConfig) || errors.Is(err, datadriver.ErrJobIDInUse) {
					t.Fatalf("NewNode(%s) = %v, want ErrInvalidConfig", job, err)
				}
				for _, w := range append(tc.want, "NodeConfig.PresenceRedis", "NodeConfig.Redis") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
			}
			// Nothing was beaten where no peer reads.
			if n, _ := tc.pres.Exists(ctx, r1.Namespace+":CKPresence").Result(); n != 0 {
				t.Errorf("the refused Nodes beat into the other dataset")
			}
		})
	}
}

// When the presence client reconnects to another server (a Sentinel
// failover or a DNS answer gone wrong), its calls wait for a new proof and
// fail while it fails: no beat renews the lease, so the holder's sessions
// end before a peer can read it stopped and take its player, and it accepts
// no Update after the peer's join. Back on the records' server, the proof
// stands again and the server plays on.
func TestPresenceClientMovingToAnotherServerFences(t *testing.T) {
	r1, r2 := testsupport.StartOwnRedis(t), testsupport.StartOwnRedis(t)
	if r1.Kind != testsupport.KindRedisServer {
		t.Skip("needs redis-server (CLIENT KILL)")
	}
	ctx := context.Background()
	var target atomic.Value
	target.Store(r1.Addr)
	pres := redis.NewClient(&redis.Options{Addr: "presence", ClientName: "presence-a", MaxRetries: 1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, target.Load().(string))
		}})
	t.Cleanup(func() { _ = pres.Close() })
	logs := &testsupport.LogBuffer{}
	cfg := func(job string, p redis.UniversalClient, log *slog.Logger) datadriver.NodeConfig {
		return datadriver.NodeConfig{JobID: job, Redis: r1.Client(t), PresenceRedis: p, Namespace: r1.Namespace,
			Beat: 100 * time.Millisecond, PresenceTTL: time.Second, Logger: log}
	}
	a, err := datadriver.NewNode(ctx, cfg("server-a", pres, slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	b, err := datadriver.NewNode(ctx, cfg("server-b", nil, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	pa := newPlayers(t, a)
	pb := newPlayers(t, b)
	p, err := pa.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	lastOK := playOn(p, t0)

	target.Store(r2.Addr)
	killClients(t, r1, "presence-a")
	q, err := pb.Join(ctx, "user:1")
	joined := time.Since(t0)
	if err != nil {
		t.Fatalf("server-b's join after server-a fenced: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("server-a's session was still live when server-b's join returned")
	}
	if !errors.Is(p.Err(), datadriver.ErrFenced) {
		t.Errorf("server-a's session ended with %v, want ErrFenced", p.Err())
	}
	if last := time.Duration(lastOK.Load()); last >= joined {
		t.Fatalf("server-a accepted an Update %v after the start, server-b's join returned at %v", last, joined)
	}
	if !strings.Contains(logs.String(), "not proven to be on one dataset") {
		t.Errorf("server-a logged no mismatch:\n%s", logs.String())
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}

	target.Store(r1.Addr)
	killClients(t, r2, "presence-a")
	rejoin, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	again, err := pa.Join(rejoin, "user:2")
	if err != nil {
		t.Fatalf("server-a's join once back on the records' server: %v", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// playOn makes p's player earn a coin every 5 ms until an Update is
// refused, and returns the time (since t0) of the last one accepted.
func playOn(p *datadriver.Profile[player], t0 time.Time) *atomic.Int64 {
	var last atomic.Int64
	go func() {
		for p.Update(func(d *player) { d.Coins++ }) == nil {
			last.Store(int64(time.Since(t0)))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return &last
}

// newPlayers is the player driver with a join wait long enough for a
// crashed holder's proof at these timings.
func newPlayers(tb testing.TB, n *datadriver.Node) *datadriver.Driver[player] {
	tb.Helper()
	d, err := datadriver.NewDriver(n, datadriver.Config[player]{Name: "PlayerData", LockWait: 10 * time.Second, Autosave: -1})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// killClients closes every connection named name on r's server.
func killClients(tb testing.TB, r *testsupport.Redis, name string) {
	tb.Helper()
	c := r.Client(tb)
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				_ = c.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err()
			}
		}
	}
}
