package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
)

// Update keeps its word while another server's join asks for the key: every
// Update that returned nil is in the data the joiner loads, and none that
// returned an error is. (An Update that began before the leave and ended
// after it used to return ErrReleased while the release saved its change.)
func TestUpdateKeepsItsWordDuringAHandoff(t *testing.T) {
	pr := newPair(t)
	var kicks atomic.Int32
	da := players(t, pr.a, func(c *datadriver.Config[player]) {
		c.Kick = func(string, datadriver.KickReason) { kicks.Add(1) }
	})
	db := players(t, pr.b)
	ctx := ctxT(t)
	for round := range 10 {
		key := fmt.Sprintf("user:%d", round)
		pa, err := da.Join(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		took, refused := map[string]bool{}, map[string]bool{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("u%d", i)
				err := pa.Update(func(d *player) {
					if d.Items == nil {
						d.Items = map[string]int{}
					}
					d.Items[id] = 1
					time.Sleep(50 * time.Microsecond) // a change that takes a while: the leave may begin meanwhile
				})
				mu.Lock()
				if err == nil {
					took[id] = true
				} else {
					refused[id] = true
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
		time.Sleep(5 * time.Millisecond)
		pb, err := db.Join(ctx, key)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("B's join: %v", err)
		}
		var got map[string]int
		pb.View(func(d *player) { got = d.Items })
		for id := range took {
			if got[id] == 0 {
				t.Errorf("round %d: Update %s returned nil but B loaded data without it", round, id)
			}
		}
		for id := range refused {
			if got[id] != 0 {
				t.Errorf("round %d: Update %s returned an error but B loaded its change", round, id)
			}
		}
		if err := pb.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := kicks.Load(); n != 10 {
		t.Errorf("A's sessions heard %d Kicks in 10 handoffs, want one each", n)
	}
}

// A session whose lease has passed when a release request reaches it ends
// once, fenced: one Kick (ReasonFenced), no leave cleanup, no release.
// (A request handled before the fence goroutine ran used to end it twice:
// Kick(fenced), then Kick(joined_elsewhere) and OnRelease after Done.)
func TestReleaseRequestAfterTheLeaseLapsed(t *testing.T) {
	pr := newPair(t)
	var mu sync.Mutex
	var reasons []string
	da := players(t, pr.a, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, r datadriver.KickReason) {
			mu.Lock()
			reasons = append(reasons, r.String())
			mu.Unlock()
		}
	})
	db := players(t, pr.b, func(c *datadriver.Config[player]) { c.LockWait = 5 * time.Second })
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	var cleanups atomic.Int32
	pa.OnRelease(func(*player) { cleanups.Add(1) })
	// A's beats fail from now on: its lease lapses within PresenceTTL -
	// FenceMargin, whatever else happens.
	pr.a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if strings.Contains(fmt.Sprint(cmd.Args()), "CKPresence") {
			return errors.New("injected: beats fail")
		}
		return nil
	})
	joined := make(chan error, 1)
	go func() {
		pb, err := db.Join(ctx, "user:1")
		if err == nil {
			_ = pb.Release(ctx)
		}
		joined <- err
	}()
	select {
	case <-pa.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("A's session never ended")
	}
	if err := <-joined; err != nil {
		t.Fatalf("B's join: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // callbacks run on the dispatcher
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 1 {
		t.Fatalf("A's session heard Kicks %v, want exactly one", reasons)
	}
	if errors.Is(pa.Err(), datadriver.ErrFenced) && (reasons[0] != "fenced" || cleanups.Load() != 0) {
		t.Errorf("a session that ended fenced heard %v and ran %d cleanups, want fenced and none", reasons, cleanups.Load())
	}
	if errors.Is(pa.Err(), datadriver.ErrReleased) && (reasons[0] != "joined_elsewhere" || cleanups.Load() != 1) {
		t.Errorf("a released session heard %v and ran %d cleanups, want joined_elsewhere and one", reasons, cleanups.Load())
	}
}

// A session asked to go whose lease lapses while its release save is in
// flight ends fenced, having heard one Kick: the leave's. Its leave cleanup
// ran once, for a release that tried to save it.
func TestFenceDuringAReleaseKicksOnce(t *testing.T) {
	pr := newPair(t, func(c *datadriver.NodeConfig) { c.SaveTimeout = time.Second })
	var mu sync.Mutex
	var reasons []string
	da := players(t, pr.a, func(c *datadriver.Config[player]) {
		c.Kick = func(_ string, r datadriver.KickReason) {
			mu.Lock()
			reasons = append(reasons, r.String())
			mu.Unlock()
		}
	})
	db := players(t, pr.b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	var cleanups atomic.Int32
	pa.OnRelease(func(*player) { cleanups.Add(1) })
	var deaf atomic.Bool
	pr.a.faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case isWrite(cmd, "release"):
			deaf.Store(true) // from the release on, A's beats fail too
			<-ctx.Done()     // and the release hangs until its deadline
			return ctx.Err()
		case deaf.Load() && strings.Contains(fmt.Sprint(cmd.Args()), "CKPresence"):
			return errors.New("injected: beats fail")
		}
		return nil
	})
	pb, err := db.Join(ctx, "user:1") // asks A, then proves it stopped
	if err != nil {
		t.Fatalf("B's join: %v", err)
	}
	_ = pb.Release(ctx)
	<-pa.Done()
	if !errors.Is(pa.Err(), datadriver.ErrFenced) {
		t.Fatalf("A's session ended with %v, want ErrFenced", pa.Err())
	}
	time.Sleep(100 * time.Millisecond) // callbacks run on the dispatcher
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 1 || reasons[0] != "joined_elsewhere" || cleanups.Load() != 1 {
		t.Errorf("A's session heard Kicks %v and ran %d cleanups, want [joined_elsewhere] and one", reasons,
			cleanups.Load())
	}
}
