package simulation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// The fault switches the simulation's hangs and pauses are made of:
// testsupport.FaultHook's Hold and MemBus's Pause.

func TestFaultHookHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testsupport.NewCluster(t)
		rdb := c.Client(t)
		t.Cleanup(func() { _ = rdb.Close() })
		h := &testsupport.FaultHook{}
		rdb.AddHook(h)
		ctx := context.Background()
		get := func(key string) string { return c.Mini.HGet(key, "f") }

		h.Hold()
		errc := make(chan error, 2)
		go func() { errc <- rdb.HSet(ctx, "held", "f", "1").Err() }()
		go func() {
			p := rdb.Pipeline()
			p.HSet(ctx, "piped", "f", "1")
			_, err := p.Exec(ctx)
			errc <- err
		}()
		synctest.Wait()
		if get("held") != "" || get("piped") != "" {
			t.Fatal("a held call reached Redis")
		}
		h.Release()
		for range 2 {
			if err := <-errc; err != nil {
				t.Fatalf("released call: %v", err)
			}
		}
		if get("held") != "1" || get("piped") != "1" {
			t.Fatal("a released call did not reach Redis")
		}

		// A held call ends with its context, unsent.
		{
			h.Hold()
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			err := rdb.HSet(cctx, "late", "f", "1").Err()
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
				t.Fatalf("held call with a deadline: %v after %s", err, time.Since(start))
			}
			h.Release()
			synctest.Wait()
			if get("late") != "" {
				t.Fatal("a call whose context ended was sent")
			}
		}
		// An aborted hold fails its calls, unsent.
		{
			h.Hold()
			go func() { errc <- rdb.HSet(ctx, "dead", "f", "1").Err() }()
			synctest.Wait()
			h.Abort()
			if err := <-errc; !errors.Is(err, testsupport.ErrInjected) {
				t.Fatalf("aborted call: %v", err)
			}
			if get("dead") != "" {
				t.Fatal("an aborted call was sent")
			}
		}
	})
}

func TestMemBusPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := testsupport.NewMemBus(nil)
		defer bus.Close()
		got := make(chan string, 10)
		for _, job := range []string{"a", "b"} {
			if _, err := bus.Endpoint(job).Subscribe(job, func(m messaging.Message) { got <- job + ":" + m.Key }); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		send := func(from, to, key string) {
			if err := bus.Endpoint(from).Publish(ctx, to, messaging.Message{Type: messaging.TypeReply, Driver: "d", Key: key}); err != nil {
				t.Fatal(err)
			}
		}
		bus.Pause("a")
		send("b", "a", "k1") // to the paused server
		send("a", "b", "k2") // from it
		send("b", "a", "k3")
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(got) != 0 {
			t.Fatalf("%d messages delivered while paused", len(got))
		}
		bus.Resume("a")
		time.Sleep(time.Millisecond) // they go a microsecond apart
		synctest.Wait()
		byJob := map[string][]string{} // each subscriber's messages, in its order
		for len(got) > 0 {
			m := <-got
			byJob[m[:1]] = append(byJob[m[:1]], m[2:])
		}
		if a, b := strings.Join(byJob["a"], ","), strings.Join(byJob["b"], ","); a != "k1,k3" || b != "k2" {
			t.Fatalf("delivered to a %q and to b %q, want k1,k3 and k2", a, b)
		}
		if st := bus.Stats(); st.Held != 3 {
			t.Fatalf("Held = %d, want 3", st.Held)
		}
	})
}

func TestServerPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testsupport.NewCluster(t)
		srv := c.Start(nil)
		ctx := context.Background()
		srv.Pause()
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := srv.Redis.Ping(cctx).Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ping of a paused server: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- srv.Redis.Ping(ctx).Err() }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if len(done) != 0 {
			t.Fatal("a paused server's call went through")
		}
		srv.Resume()
		if err := <-done; err != nil {
			t.Fatalf("held ping after Resume: %v", err)
		}
	})
}
