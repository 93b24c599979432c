package datadriver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// TestCrashTakeoverDefaultTimings runs a crash takeover with the reference
// timings (beat 3 s, presence TTL 10 s, park 0.5 s doubling to 2 s,
// LockWait 15 s) on virtual time: miniredis runs inside the synctest bubble,
// so its TIME follows the bubble's clock, and the bus is the in-process
// double.
func TestCrashTakeoverDefaultTimings(t *testing.T) {
	for _, phase := range []time.Duration{0, 1500 * time.Millisecond, 2900 * time.Millisecond} {
		t.Run("crash "+phase.String()+" after a beat", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mr := miniredis.NewMiniRedis()
				defer mr.Close()
				bus := testsupport.NewMemBus(nil)
				defer bus.Close()
				newNode := func(job string, faults *testsupport.FaultHook) *datadriver.Node {
					client := func() *redis.Client {
						c := redis.NewClient(&redis.Options{
							Addr:   "127.0.0.1:0", // never dialled: no name lookup in the bubble
							Dialer: func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
						})
						c.AddHook(faults) // a crash stops the beats too
						return c
					}
					rdb, prdb := client(), client()
					n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
						JobID: job, Redis: rdb, PresenceRedis: prdb, Bus: bus.Endpoint(job), Namespace: "v",
						Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = n.Close(context.Background()); _ = rdb.Close(); _ = prdb.Close() })
					return n
				}
				fa, fb := &testsupport.FaultHook{}, &testsupport.FaultHook{}
				a, b := newNode("server-a", fa), newNode("server-b", fb)
				cfg := datadriver.Config[player]{Name: "PlayerData", Autosave: -1}
				da, _ := datadriver.NewDriver(a, cfg)
				db, _ := datadriver.NewDriver(b, cfg)
				ctx := context.Background()

				pa, err := da.Join(ctx, "user:1")
				if err != nil {
					t.Fatal(err)
				}
				_ = pa.Update(func(d *player) { d.Coins = 11 })
				if err := pa.Save(ctx); err != nil {
					t.Fatal(err)
				}
				// Beats fall on multiples of 3 s from A's start; crash `phase` after one.
				time.Sleep(30*time.Second + phase)
				crashed := time.Now()
				fa.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
				bus.Disconnect("server-a")

				pb, err := db.Join(ctx, "user:1")
				took := time.Since(crashed)
				if err != nil {
					t.Fatalf("B's join after the crash: %v (after %s)", err, took)
				}
				if coins(pb) != 11 {
					t.Fatalf("B got coins %d, want 11", coins(pb))
				}
				// The reference design: 10 to 15 s after the crash.
				if took < 10*time.Second-phase || took > 15*time.Second {
					t.Fatalf("taken over %s after the crash; want within [%s, 15s]", took, 10*time.Second-phase)
				}
				t.Logf("crash %s after a beat: taken over %s later (virtual time)", phase, took)
				fa.Clear()
				_ = pb.Release(ctx)
			})
		})
	}
}
