package datadriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// pipeCount counts the script calls that went to Redis in pipelines and on
// their own; with masterOf, the pipelines whose script calls named keys of
// more than one master (mixed); and the pipelines that carried a script
// call with an argument over bigArg bytes beside other script calls (big).
type pipeCount struct {
	single, piped, pipes, mixed, big atomic.Int64
	masterOf                         func(key string) string
}

// bigArg is the size of an argument pipeCount counts as big.
const bigArg = 1 << 20

// hasBigArg reports whether one of c's arguments is over bigArg bytes.
func hasBigArg(c redis.Cmder) bool {
	for _, a := range c.Args() {
		if s, ok := a.(string); ok && len(s) > bigArg {
			return true
		}
		if b, ok := a.([]byte); ok && len(b) > bigArg {
			return true
		}
	}
	return false
}

func scriptCmd(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }

func (h *pipeCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pipeCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if scriptCmd(cmd) {
			h.single.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *pipeCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n, big := 0, false
		masters := map[string]bool{}
		for _, c := range cmds {
			if scriptCmd(c) {
				n++
				big = big || hasBigArg(c)
				if k, ok := testsupport.ScriptKey(c, 1); ok && h.masterOf != nil {
					masters[h.masterOf(k)] = true
				}
			}
		}
		if n > 0 {
			h.piped.Add(int64(n))
			h.pipes.Add(1)
		}
		if len(masters) > 1 {
			h.mixed.Add(1)
		}
		if big && n > 1 {
			h.big.Add(1)
		}
		return next(ctx, cmds)
	}
}

// sessions runs workers players on d, each sessions sessions back to back
// (join, save, leave, a coin earned before each write), then checks that
// every session's progress is there: no call lost, run twice or answered
// with another's answer.
func sessions(t *testing.T, d *datadriver.Driver[player], workers, sessions int) {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := "p" + strconv.Itoa(w)
			for range sessions {
				p, err := d.Join(ctx, key)
				if err != nil {
					t.Errorf("%s: join: %v", key, err)
					return
				}
				_ = p.Update(func(d *player) { d.Coins++ })
				if err := p.Save(ctx); err != nil {
					t.Errorf("%s: save: %v", key, err)
					return
				}
				_ = p.Update(func(d *player) { d.Coins++ })
				if err := p.Release(ctx); err != nil {
					t.Errorf("%s: release: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for w := range workers {
		key := "p" + strconv.Itoa(w)
		p, err := d.Join(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var c int
		p.View(func(d *player) { c = d.Coins })
		if c != 100+2*sessions {
			t.Fatalf("%s has %d coins, want %d", key, c, 100+2*sessions)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// sharedRoundTrips fails t unless some script calls went in pipelines of
// more than one.
func sharedRoundTrips(t *testing.T, count *pipeCount) {
	t.Helper()
	single, piped, pipes := count.single.Load(), count.piped.Load(), count.pipes.Load()
	t.Logf("script calls: %d on their own, %d in %d pipelines", single, piped, pipes)
	if piped == 0 || pipes >= piped {
		t.Fatalf("%d script calls in %d pipelines: with SoloCalls 1 and many players, calls share round trips", piped, pipes)
	}
}

func TestManySessionsSharePipelines(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SoloCalls = 1 })
	count := &pipeCount{}
	a.rdb.AddHook(count)
	sessions(t, players(t, a), 24, 20)
	sharedRoundTrips(t, count)
}

// clusterPipelined is TestManySessionsSharePipelines on the Redis Cluster:
// each master has its own lane, so every pipeline goes to one master (and
// the audit sees every call go straight to its master), with SoloCalls
// unset as with 1.
func clusterPipelined(t *testing.T, sc *clusterScope) {
	dflt := &pipeCount{masterOf: sc.rc.MasterOf}
	a := sc.serverWith(t, "server-a", []redis.Hook{dflt})
	sessions(t, players(t, a), 32, 5)
	t.Logf("SoloCalls unset: %d script calls on their own, %d in %d pipelines", dflt.single.Load(), dflt.piped.Load(), dflt.pipes.Load())
	count := &pipeCount{masterOf: sc.rc.MasterOf}
	b := sc.sub("b").serverWith(t, "server-b", []redis.Hook{count}, func(c *datadriver.NodeConfig) { c.SoloCalls = 1 })
	sessions(t, players(t, b), 16, 10)
	sharedRoundTrips(t, count)
	if n := dflt.mixed.Load() + count.mixed.Load(); n != 0 {
		t.Fatalf("%d pipelines of script calls named keys of more than one master", n)
	}
}

// clusterStalled: a master that hangs holds no call to another. With one
// solo call per master, a save hung on one master's record leaves a save on
// another master's free to land at once, while a save on the same master
// waits for the hung one's round trip to end.
func clusterStalled(t *testing.T, sc *clusterScope) {
	a := sc.server(t, "server-a", func(c *datadriver.NodeConfig) {
		c.SoloCalls = 1
		c.SaveTimeout = time.Minute // the hung save ends when the test lets it
	})
	d := players(t, a)
	ctx := ctxT(t)
	hung, other := sc.profilesOnDifferentMasters("PlayerData", "p")
	same := ""
	for i := 100; same == ""; i++ {
		if k := "p" + strconv.Itoa(i); sc.masterOf(sc.recordKey(k)) == sc.masterOf(sc.recordKey(hung)) {
			same = k
		}
	}
	profiles := map[string]*datadriver.Profile[player]{}
	for _, k := range []string{hung, other, same} {
		p, err := d.Join(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 7 })
		profiles[k] = p
	}
	block, arrived := holdScriptCalls(a.faults, sc.recordKey(hung), true)
	saved := func(k string) chan error {
		ch := make(chan error, 1)
		go func() { ch <- profiles[k].Save(ctx) }()
		return ch
	}
	hungDone := saved(hung)
	<-arrived
	sameDone := saved(same)
	if err := <-saved(other); err != nil {
		t.Fatalf("save on another master while one hangs: %v", err)
	}
	select {
	case err := <-hungDone:
		t.Fatalf("the hung save ended (%v) before the test let it: the test tests nothing", err)
	case err := <-sameDone:
		t.Fatalf("a save on the hung master's lane ended (%v) before the hung one", err)
	default:
	}
	close(block)
	if err := <-hungDone; err != nil {
		t.Fatalf("hung save, let go: %v", err)
	}
	if err := <-sameDone; err != nil {
		t.Fatalf("save queued behind the hung one: %v", err)
	}
	a.faults.Clear()
	for _, k := range []string{hung, other, same} {
		if c := clusterStored[player](t, sc, k).Coins; c != 7 {
			t.Fatalf("%s stored %d coins, want 7", k, c)
		}
	}
}

func TestSoloCallsNegativeSendsEveryCallAlone(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SoloCalls = -1 })
	count := &pipeCount{}
	a.rdb.AddHook(count)
	d := players(t, a)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for range 10 {
				p, err := d.Join(ctx, "p"+strconv.Itoa(w))
				if err != nil {
					t.Error(err)
					return
				}
				if err := p.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := count.pipes.Load(); n != 0 {
		t.Fatalf("%d pipelines of script calls with SoloCalls -1", n)
	}
}

func TestAWaitingSaveEndsAtItsDeadline(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SoloCalls = 1 })
	d := players(t, a)
	ctx := ctxT(t)
	held, err := d.Join(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.Join(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	// held's save hangs in Redis's stead (the one solo round trip taken);
	// other's save waits behind it and ends at its own deadline, before
	// held's, with the deadline's error.
	block, arrived := holdScriptCalls(a.faults, record.Key(r.Namespace, "PlayerData", "held"), true)
	_ = held.Update(func(d *player) { d.Coins++ })
	heldDone := make(chan error, 1)
	go func() {
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		heldDone <- held.Save(hctx)
	}()
	<-arrived
	_ = other.Update(func(d *player) { d.Coins++ })
	start := time.Now()
	octx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = other.Save(octx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("other's save: %v, want its deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("other's save returned after %s; its deadline 200 ms", took)
	}
	close(block)
	if err := <-heldDone; err != nil {
		t.Fatalf("held's save: %v", err)
	}
	// other's session goes on: its next save lands.
	if err := other.Save(ctx); err != nil {
		t.Fatalf("other's next save: %v", err)
	}
}

// holdScriptCalls makes the script calls on key signal arrived (the first
// of them) and, with hold, wait in Redis's stead until block is closed or
// their context ends.
func holdScriptCalls(f *testsupport.FaultHook, key string, hold bool) (block, arrived chan struct{}) {
	block, arrived = make(chan struct{}), make(chan struct{}, 1)
	f.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if k, ok := testsupport.ScriptKey(cmd, 1); !ok || k != key {
			return nil
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		if !hold {
			return nil
		}
		select {
		case <-block:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	return block, arrived
}

// Profiles near MaxDataBytes save in the same pipelines as small sessions'
// calls: every big save lands whole (the record holds the last one), and
// every small session's progress is there.
func TestBigProfilesShareRoundTripsWithSmallOnes(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.SoloCalls = 1 })
	count := &pipeCount{}
	a.rdb.AddHook(count)
	d := players(t, a)
	ctx := ctxT(t)
	chunk := make([]byte, 1<<10)
	rand.Read(chunk)
	body := strings.Repeat(hex.EncodeToString(chunk), 1700) // 3.4 MB, under the default 4 MiB
	smallDone := make(chan struct{})
	last := make([]string, 2)
	var wg sync.WaitGroup
	for b := range last {
		wg.Go(func() {
			key := "big" + strconv.Itoa(b)
			p, err := d.Join(ctx, key)
			if err != nil {
				t.Errorf("%s: join: %v", key, err)
				return
			}
			for i := 0; i < 20; i++ {
				name := strconv.Itoa(i) + ":" + body
				_ = p.Update(func(d *player) { d.Name = name })
				if err := p.Save(ctx); err != nil {
					t.Errorf("%s: save %d: %v", key, i, err)
					return
				}
				last[b] = name
				select {
				case <-smallDone:
					if count.big.Load() > 0 {
						i = 20 // enough: a big save shared a round trip
					}
				default:
				}
			}
			if err := p.Release(ctx); err != nil {
				t.Errorf("%s: release: %v", key, err)
			}
		})
	}
	sessions(t, d, 8, 15)
	close(smallDone)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if count.big.Load() == 0 {
		t.Fatal("no big save shared a pipeline with another call: the test tests nothing")
	}
	t.Logf("%d pipelines carried a big save beside other calls", count.big.Load())
	for b, want := range last {
		key := "big" + strconv.Itoa(b)
		if got := stored(t, r, key).Name; got != want {
			t.Fatalf("%s's record holds %d bytes starting %.8q, want the last save's (%.8q)", key, len(got), got, want)
		}
	}
}
