package datadriver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
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
				fa, fb := &testsupport.FaultHook{}, &testsupport.FaultHook{}
				a, b := virtualNode(t, mr, bus, "server-a", fa), virtualNode(t, mr, bus, "server-b", fb)
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

// virtualNode is a Node on miniredis and the in-process bus inside a
// synctest bubble, its Redis calls (the beats' too) through faults.
func virtualNode(t *testing.T, mr *miniredis.Miniredis, bus *testsupport.MemBus, job string,
	faults *testsupport.FaultHook) *datadriver.Node {
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

// TestAgeFenceFiresAtTheAgeDeadlineWhileRefreshesFail: a lock without the
// presence flag whose refreshes fail (each takes 100 ms and errs, so each
// retry is set a sixteenth of LockTTL after its failure) ends at its age
// deadline to the instant, on virtual time: the profile's one timer is
// armed for the age deadline when the next retry would come later.
func TestAgeFenceFiresAtTheAgeDeadlineWhileRefreshesFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		faults := &testsupport.FaultHook{}
		const ttl = 8 * time.Second
		p := agedSession(t, faults, ttl)
		ctx := context.Background()
		_ = p.Update(func(d *player) { d.Coins = 1 })
		sent := time.Now() // no virtual time passes in a call that does not wait
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		var failed atomic.Int32
		faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
			if isScript(cmd, record.ScriptSave) {
				failed.Add(1)
				time.Sleep(100 * time.Millisecond)
				return testsupport.ErrInjected
			}
			return nil
		})
		<-p.Done()
		ended := time.Since(sent)
		if !errors.Is(p.Err(), datadriver.ErrFenced) {
			t.Fatalf("Err = %v, want ErrFenced", p.Err())
		}
		// Refreshes from LockTTL/2, every 100 ms + LockTTL/16: 4.0, 4.6,
		// ..., 7.6 s, the next at 8.2 s, past the deadline.
		if ended != ttl || failed.Load() < 5 {
			t.Fatalf("the session ended %s after its last landed write, after %d failed refreshes; want at the age "+
				"deadline (%s) after 5 or more", ended, failed.Load(), ttl)
		}
	})
}

// TestRefreshesKeepAnIdleSessionPastItsAgeDeadline: a lock without the
// presence flag whose session changes nothing stays live for many times
// LockTTL, on virtual time: each refresh that lands moves the age deadline
// (the last landed write's send time plus LockTTL), and the next refresh
// comes LockTTL/2 after it.
func TestRefreshesKeepAnIdleSessionPastItsAgeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var saves atomic.Int32
		faults := &testsupport.FaultHook{}
		faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
			if isScript(cmd, record.ScriptSave) {
				saves.Add(1)
			}
			return nil
		})
		const ttl = 8 * time.Second
		p := agedSession(t, faults, ttl)
		ctx := context.Background()
		time.Sleep(5 * ttl)
		if err := p.Err(); err != nil {
			t.Fatalf("the idle session ended after %d refreshes: %v; want it live after 5 × LockTTL", saves.Load(), err)
		}
		// A refresh each LockTTL/2: about 10 in 5 × LockTTL.
		if n := saves.Load(); n < 8 || n > 12 {
			t.Fatalf("%d refreshes in 5 × LockTTL; want about 10 (one each LockTTL/2)", n)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// agedSession joins a profile, inside a synctest bubble, on a Node of
// miniredis whose calls go through faults, under a driver whose locks go by
// age after ttl (no presence flag) and that never autosaves.
func agedSession(t *testing.T, faults *testsupport.FaultHook, ttl time.Duration) *datadriver.Profile[player] {
	mr := miniredis.NewMiniRedis()
	t.Cleanup(mr.Close)
	bus := testsupport.NewMemBus(nil)
	t.Cleanup(bus.Close)
	a := virtualNode(t, mr, bus, "server-a", faults)
	cfg := datadriver.Config[player]{Name: "PlayerData", Autosave: -1}
	byAge(ttl, time.Second)(&cfg)
	da, err := datadriver.NewDriver(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := da.Join(context.Background(), "user:1")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
