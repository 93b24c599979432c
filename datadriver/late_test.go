package datadriver_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/testsupport"
)

// lateRoute sends the next save of the client it hooks through slow (a
// client of a Proxy) instead of its own connections, once armed: that save
// can be held in the network past its caller's deadline while the later
// ones go straight.
type lateRoute struct {
	slow  *redis.Client
	armed atomic.Bool
}

func (h *lateRoute) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *lateRoute) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") && h.armed.CompareAndSwap(true, false) {
			return h.slow.Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h *lateRoute) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptCalls is how many EVALSHA calls rdb's server has run (INFO
// commandstats).
func scriptCalls(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(info, "cmdstat_evalsha:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(after[:strings.IndexByte(after, ',')], 10, 64)
	return n
}

// A save whose bytes the network holds past its caller's deadline (sent on
// a connection that then timed out and was closed: the kernel still
// delivers what it holds) reaches Redis after the profile's next save
// landed. It must not put its older data over the newer: the record keeps
// the later save's coins, and the session goes on. Before writes were
// numbered in their session (lock.seq), the late save landed: 2 coins
// stored after 3 were saved and reported.
func TestALateSaveNeverOverwritesANewerOne(t *testing.T) {
	r := testsupport.StartOwnRedis(t) // its script calls are this test's alone
	if r.Kind != testsupport.KindRedisServer {
		t.Skip("needs a redis-server of its own (INFO commandstats)")
	}
	stats := r.Client(t)
	px := testsupport.StartProxy(t, r.Addr)
	route := &lateRoute{slow: redis.NewClient(&redis.Options{Addr: px.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})}
	t.Cleanup(func() { _ = route.slow.Close() })
	ctx := ctxT(t)
	if err := route.slow.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	a := newServer(t, r, "server-a")
	a.rdb.AddHook(route)
	d := players(t, a)
	p, err := d.Join(ctx, "user:late")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 1 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}

	px.Blackhole()
	route.armed.Store(true)
	_ = p.Update(func(d *player) { d.Coins = 2 })
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = p.Save(sctx)
	cancel()
	if err == nil {
		t.Fatal("the held save reported success")
	}
	_ = p.Update(func(d *player) { d.Coins = 3 })
	if err := p.Save(ctx); err != nil {
		t.Fatalf("the next save: %v", err)
	}
	if c := stored(t, r, "user:late").Coins; c != 3 {
		t.Fatalf("stored %d coins after the next save, want 3", c)
	}

	before := scriptCalls(t, stats)
	px.Heal() // the held save reaches Redis now
	eventually(t, 5*time.Second, "the late save reaches Redis", func() bool { return scriptCalls(t, stats) > before })
	if c := stored(t, r, "user:late").Coins; c != 3 {
		t.Fatalf("stored %d coins once the late save arrived, want 3: older data over newer", c)
	}
	if err := p.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
	_ = p.Update(func(d *player) { d.Coins = 4 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c := stored(t, r, "user:late").Coins; c != 4 {
		t.Fatalf("stored %d coins after the release, want 4", c)
	}
}
