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

	"github.com/ckernel/playerdata/internal/record"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/testsupport"
)

// The presence timings of fast: a crash is taken over in about a second,
// and the lease (fastTTL - fastMargin) leaves eight beats of room, so that a
// loaded machine running the race detector does not fence a live server.
const (
	fastBeat   = 100 * time.Millisecond
	fastTTL    = time.Second
	fastMargin = 200 * time.Millisecond
)

// fast shortens every handoff timing tenfold-ish so that crash tests take
// about a second of presence expiry.
func fast(c *datadriver.NodeConfig) {
	c.Beat = fastBeat
	c.PresenceTTL = fastTTL
	c.FenceMargin = fastMargin
	c.RequestRepeat = 300 * time.Millisecond
	c.ParkMin = 20 * time.Millisecond
	c.ParkMax = 80 * time.Millisecond
}

// withNATS connects the server to n.
func withNATS(tb testing.TB, n *testsupport.NATS) func(*datadriver.NodeConfig) {
	return func(c *datadriver.NodeConfig) { c.NATS = n.Connect(tb) }
}

// crash stops s as a process death would: nothing it sends reaches Redis or
// NATS any more, and its goroutines stop without releasing anything.
func crash(tb testing.TB, s *server) {
	tb.Helper()
	s.faults.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.node.Close(ctx)
}

// kicks counts Kick calls by reason.
type kicks struct{ joined, lost, fenced atomic.Int32 }

func (k *kicks) kick(_ string, reason datadriver.KickReason) {
	switch reason {
	case datadriver.ReasonJoinedElsewhere:
		k.joined.Add(1)
	case datadriver.ReasonLockLost:
		k.lost.Add(1)
	case datadriver.ReasonFenced:
		k.fenced.Add(1)
	}
}

func TestHandoffStaleConnection(t *testing.T) {
	pr := newPair(t)
	a, b := pr.a, pr.b
	var ka kicks
	da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	db := players(t, b)
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 42 }) // not saved yet
	pa.OnRelease(func(d *player) { d.Name = "left a" })

	start := time.Now()
	pb, err := db.Join(ctx, "user:1")
	if err != nil {
		t.Fatalf("B's join: %v", err)
	}
	t.Logf("stale connection handed over in %s", time.Since(start))
	pb.View(func(d *player) {
		if d.Coins != 42 || d.Name != "left a" {
			t.Fatalf("B got %+v, want A's latest data and its leave cleanup", *d)
		}
	})
	awaitHandedOff(t, pa, &ka)
	if ka.joined.Load() != 1 {
		t.Fatalf("A's session kicked %d times with %q", ka.joined.Load(), datadriver.ReasonJoinedElsewhere)
	}
	if !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Fatalf("A's profile Err = %v, want ErrReleased", pa.Err())
	}
	requestAnswered(t, b)
}

func TestHandoffFailedLeaveSaveRetried(t *testing.T) {
	pr := newPair(t)
	a, b := pr.a, pr.b
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 5 })
	var failed atomic.Bool
	a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "release") && failed.CompareAndSwap(false, true) {
			return testsupport.ErrInjected // the first release fails, later ones land
		}
		return nil
	})
	if err := pa.Release(ctx); err == nil {
		t.Fatal("the first release should fail")
	}
	pb, err := db.Join(ctx, "user:2")
	if err != nil {
		t.Fatalf("B's join: %v", err)
	}
	if coins(pb) != 5 {
		t.Fatalf("B got coins %d, want 5 from A's retried release", coins(pb))
	}
	awaitEnd(t, pa)
	if !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Fatalf("A's retained profile Err = %v, want ErrReleased", pa.Err())
	}
}

func TestHandoffCrashTakeover(t *testing.T) {
	pr := newPair(t)
	a, b := pr.a, pr.b
	da, db := players(t, a), players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 7 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 8 }) // lost with the crash
	crashed := time.Now()
	crash(t, a)

	pb, err := db.Join(ctx, "user:3")
	if err != nil {
		t.Fatalf("B's join after A crashed: %v", err)
	}
	took := time.Since(crashed)
	t.Logf("crash taken over %s after the crash", took)
	if coins(pb) != 7 {
		t.Fatalf("B got coins %d, want 7: exactly A's last landed save", coins(pb))
	}
	// Never early: A's presence lives PresenceTTL after its last beat, which
	// was at most one Beat before the crash, and the silence must last a beat.
	if min := fastTTL - fastBeat; took < min {
		t.Fatalf("taken over %s after the crash, before A's presence could expire (%s)", took, min)
	}
	if !strings.Contains(b.logs.String(), "took the lock of user:3 from server server-a, which stopped beating presence") {
		t.Fatalf("no takeover warning in B's log:\n%s", b.logs)
	}
}

func TestHandoffStallingHolderKeepsLock(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", fast, withNATS(t, n), func(c *datadriver.NodeConfig) { c.SaveTimeout = time.Minute })
	b := newServer(t, r, "server-b", fast, withNATS(t, n))
	stale := func(c *datadriver.Config[player]) {
		c.LockTTL, c.LockSkew = 200*time.Millisecond, 100*time.Millisecond
		c.LockWait = 1500 * time.Millisecond
	}
	da, db := players(t, a, stale), players(t, b, stale)
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:4")
	if err != nil {
		t.Fatal(err)
	}
	unstall := make(chan struct{})
	a.faults.SetBefore(func(ctx context.Context, cmd redis.Cmder) error {
		if isWrite(cmd, "save") || isWrite(cmd, "release") {
			select {
			case <-unstall:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	_, err = db.Join(ctx, "user:4")
	if !errors.Is(err, datadriver.ErrWaitTimeout) {
		t.Fatalf("B's join on a live, stalling holder = %v, want ErrWaitTimeout", err)
	}
	var le *datadriver.LockedError
	if !errors.As(err, &le) || le.Holder != "server-a" || !le.Presence || le.Age < 300*time.Millisecond {
		t.Fatalf("LockedError %+v: want A's presence-flagged lock, older than LockTTL+LockSkew", le)
	}
	if rec := recordFields(t, r, "PlayerData", "user:4"); rec["lock.job"] != "server-a" {
		t.Fatalf("A lost its lock by age while alive: %v", rec)
	}
	// A kept the lock, but not the session: once its lock went LockTTL
	// without a landed write, a joiner whose presence read failed could have
	// taken it by age, so A fenced the session off itself.
	if !errors.Is(pa.Err(), datadriver.ErrFenced) {
		t.Fatalf("A's profile Err = %v, want ErrFenced", pa.Err())
	}
	close(unstall)
	// A's stalled give-back now lands: the lock is free for the next join.
	eventually(t, 5*time.Second, "A gives the lock back", func() bool {
		return recordFields(t, r, "PlayerData", "user:4")["lock.token"] == ""
	})
}

func TestHandoffHolderWithoutPresence(t *testing.T) {
	pr := newPair(t)
	r, a, b := pr.r, pr.a, pr.b
	da := players(t, a, datadriver.WithoutHandoff[player])
	db := players(t, b, func(c *datadriver.Config[player]) {
		c.LockTTL, c.LockSkew = 2*time.Second, 500*time.Millisecond
		c.LockWait = time.Second
	})
	ctx := ctxT(t)

	pa, err := da.Join(ctx, "user:5")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 9 })
	if err := pa.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := recordFields(t, r, "PlayerData", "user:5"); rec["lock.presence"] != "0" {
		t.Fatalf("a driver with handoff off wrote presence=%q", rec["lock.presence"])
	}
	saved := time.Now()
	crash(t, a)
	// A's presence expires within PresenceTTL, but its lock has no flag: it
	// is never taken through presence, only by age.
	if _, err := db.Join(ctx, "user:5"); !errors.Is(err, datadriver.ErrWaitTimeout) {
		t.Fatalf("B's join on an unflagged lock = %v, want ErrWaitTimeout", err)
	}
	if time.Since(saved) >= 2500*time.Millisecond {
		t.Skip("machine too slow to check the early refusal")
	}
	time.Sleep(2500*time.Millisecond - time.Since(saved)) // let the lock age past LockTTL+LockSkew
	pb, err := db.Join(ctx, "user:5")
	if err != nil {
		t.Fatalf("B's join once the lock is stale by age: %v", err)
	}
	if coins(pb) != 9 {
		t.Fatalf("B got coins %d, want 9", coins(pb))
	}
}

// publishRaw sends m to job's handoff subject from a fresh connection.
func publishRaw(t *testing.T, n *testsupport.NATS, ns, job string, m messaging.Message) {
	t.Helper()
	bus, err := messaging.NewNATSBus(n.Connect(t), messaging.NATSConfig{Prefix: ns + "." + messaging.DefaultPrefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Publish(context.Background(), job, m); err != nil {
		t.Fatal(err)
	}
}

func TestHandoffLateAndForgedRequests(t *testing.T) {
	pr := newPair(t)
	r, n, a, b := pr.r, pr.n, pr.a, pr.b
	var ka kicks
	da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	db := players(t, b)
	ctx := ctxT(t)

	// The player is on A, hops to B, and comes back to A.
	if _, err := da.Join(ctx, "user:6"); err != nil {
		t.Fatal(err)
	}
	firstToken := recordFields(t, r, "PlayerData", "user:6")["lock.token"]
	if _, err := db.Join(ctx, "user:6"); err != nil {
		t.Fatal(err)
	}
	pa, err := da.Join(ctx, "user:6")
	if err != nil {
		t.Fatal(err)
	}
	kicked := ka.joined.Load()

	for _, tc := range []struct{ name, token string }{
		{"a late request naming A's first lock", firstToken},
		{"a forged request naming no lock", "forged-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Answered: a reply, or none when server-b had one this window.
			answered := func() uint64 { s := a.node.HandoffStats(); return s.RepliesSent + s.RepliesCoalesced }
			before := answered()
			publishRaw(t, n, r.Namespace, "server-a", messaging.Message{
				Type: messaging.TypeRequest, Driver: "PlayerData", Key: "user:6", Requester: "server-b", Token: tc.token,
			})
			eventually(t, 5*time.Second, "A answers the request", func() bool { return answered() > before })
			if pa.Err() != nil || ka.joined.Load() != kicked {
				t.Fatalf("the request ended A's newer session: Err %v, kicks %d", pa.Err(), ka.joined.Load())
			}
			if err := pa.Save(ctx); err != nil {
				t.Fatalf("A's session no longer saves: %v", err)
			}
		})
	}
	t.Run("a request for an unknown driver is dropped and counted", func(t *testing.T) {
		before := a.node.HandoffStats().DroppedUnknownDriver
		publishRaw(t, n, r.Namespace, "server-a", messaging.Message{
			Type: messaging.TypeRequest, Driver: "NoSuchDriver", Key: "user:6", Requester: "server-b", Token: "x",
		})
		eventually(t, 5*time.Second, "the drop is counted", func() bool {
			return a.node.HandoffStats().DroppedUnknownDriver > before
		})
	})
}

func TestHandoffRedisRestartHandsNoLiveLockAway(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disrupt func(t *testing.T, r *testsupport.Redis)
	}{
		{"restart from an older snapshot (new run id, rewound beats)", func(t *testing.T, r *testsupport.Redis) {
			r.RestartKeepData(t)
			// The snapshot predates A's last beats: its field has already expired.
			c := r.Client(t)
			now, err := c.Time(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(context.Background(), r.Namespace+":CKPresence", "server-a", now.Add(-5*time.Second).UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"failover to an empty presence hash", func(t *testing.T, r *testsupport.Redis) {
			if err := r.Client(t).Del(context.Background(), r.Namespace+":CKPresence").Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n := testsupport.StartOwnRedis(t), testsupport.StartNATS(t)
			timings := func(c *datadriver.NodeConfig) {
				// A TTL of 3 s leaves A's lease 2.8 s: the disruption (a
				// restart on a loaded machine can take a second) and the
				// half second of failed beats after it fit.
				c.Beat, c.PresenceTTL, c.FenceMargin = 200*time.Millisecond, 3*time.Second, 200*time.Millisecond
				c.ParkMin, c.ParkMax = 20*time.Millisecond, 100*time.Millisecond
			}
			// A beats presence but answers no requests (no bus): only presence
			// could hand its lock over.
			a := newServer(t, r, "server-a", timings)
			b := newServer(t, r, "server-b", timings, withNATS(t, n))
			da := players(t, a)
			// B waits past the one-TTL grace after the restart: by then only
			// A's resumed beats keep its lock.
			db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 5 * time.Second })
			ctx := ctxT(t)
			pa, err := da.Join(ctx, "user:7")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a beat or two of A's land first

			// A's beats fail for a while after the disruption (less than its fence
			// threshold): its old beat expires, and a reader that trusted a missing
			// field would take the lock.
			var blockBeats atomic.Bool
			blockBeats.Store(true)
			a.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
				if k, ok := testsupport.ScriptKey(cmd, 1); ok && strings.HasSuffix(k, "CKPresence") && blockBeats.Load() {
					return testsupport.ErrInjected
				}
				return nil
			})
			tc.disrupt(t, r)
			go func() { time.Sleep(500 * time.Millisecond); blockBeats.Store(false) }()

			_, err = db.Join(ctx, "user:7")
			if !errors.Is(err, datadriver.ErrWaitTimeout) {
				t.Fatalf("B's join = %v, want ErrWaitTimeout: A is alive (A's session: %v)", err, pa.Err())
			}
			if rec := recordFields(t, r, "PlayerData", "user:7"); rec["lock.job"] != "server-a" {
				t.Fatalf("A's lock was handed away: %v", rec)
			}
			if err := pa.Save(ctx); err != nil {
				t.Fatalf("A's session after the disruption: %v", err)
			}
		})
	}
}

func TestHandoffPresenceCost(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", fast, withNATS(t, n))
	d := players(t, a)
	ctx := ctxT(t)
	for _, k := range []string{"p1", "p2", "p3", "p4", "p5"} {
		if _, err := d.Join(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	counter, records := &testsupport.CommandCounter{}, &testsupport.CommandCounter{}
	a.prdb.AddHook(counter)
	a.rdb.AddHook(records)
	time.Sleep(time.Second) // ten beats
	beats := 0
	for _, c := range counter.Commands() {
		if c == "evalsha" || c == "eval" {
			beats++
		}
	}
	if beats < 5 || beats > 12 {
		t.Fatalf("%d script calls in ten beats with five players: want one presence write per beat, whatever the player count (%v)", beats, counter.Commands())
	}
	if n := records.RoundTrips(); n != 0 {
		t.Fatalf("%d calls on the records' client with nothing to save (%v): beats go through the presence client", n,
			records.Commands())
	}
	if s := a.node.HandoffStats(); s.RequestsSent+s.RepliesSent != 0 {
		t.Fatalf("messages on the bus with no join waiting: %+v", s)
	}
}

func TestHandoffManualLoadWithWait(t *testing.T) {
	pr := newPair(t)
	a, b := pr.a, pr.b
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	pa, err := da.Join(ctx, "user:8")
	if err != nil {
		t.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Coins = 12 })
	if _, err := db.Load(ctx, "user:8", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrLocked) {
		t.Fatalf("Load without a wait = %v, want ErrLocked at once", err)
	}
	if s := b.node.HandoffStats(); s.RequestsSent != 0 {
		t.Fatalf("a load without a wait asked the holder: %+v", s)
	}
	pb, err := db.Load(ctx, "user:8", datadriver.LoadOptions{HandoffWait: 5 * time.Second})
	if err != nil {
		t.Fatalf("Load with a wait: %v", err)
	}
	if coins(pb) != 12 {
		t.Fatalf("coins %d, want 12", coins(pb))
	}
}

// A request that reaches the holder while its load of the key is still in
// flight is answered when the load settles: the new session, whose lock the
// request names, is ended and handed over.
func TestHandoffRequestDuringLoad(t *testing.T) {
	pr := newPair(t)
	a, b := pr.a, pr.b
	var ka kicks
	da := players(t, a, func(c *datadriver.Config[player]) { c.Kick = ka.kick })
	db := players(t, b)
	ctx := ctxT(t)
	// A's acquire lands, but A's load does not settle until B's request has
	// arrived.
	inAcquire, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isScript(cmd, record.ScriptAcquire) && err == nil {
			once.Do(func() { close(inAcquire); <-proceed })
		}
		return nil
	})
	loaded := make(chan *datadriver.Profile[player], 1)
	go func() {
		p, err := da.Join(ctx, "user:13")
		if err != nil {
			t.Errorf("A's join: %v", err)
		}
		loaded <- p
	}()
	<-inAcquire
	before := a.node.HandoffStats().RequestsReceived
	joined := joinAsync(t, ctx, db, "user:13")
	eventually(t, 5*time.Second, "B's request reaches A while A is loading", func() bool {
		return a.node.HandoffStats().RequestsReceived > before
	})
	close(proceed)
	pa, pb := <-loaded, <-joined
	if pa == nil || pb == nil {
		t.FailNow()
	}
	awaitHandedOff(t, pa, &ka)
	if ka.joined.Load() != 1 || !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Fatalf("A's new session: kicks %d, Err %v; want it ended for B", ka.joined.Load(), pa.Err())
	}
	if pb.Epoch() != 2 {
		t.Fatalf("B's epoch %d, want 2", pb.Epoch())
	}
	if n := b.node.HandoffStats().RequestsSent; n != 1 {
		t.Fatalf("B sent %d requests, want 1: the first is answered when A's load settles", n)
	}
}

// One subscription and one presence beat per server, however many drivers.
func TestHandoffOneSubscriptionPerServer(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	nc := n.Connect(t)
	s := newServer(t, r, "server-a", fast, func(c *datadriver.NodeConfig) { c.NATS = nc })
	players(t, s)
	for _, name := range []string{"Inventory", "Quests", "Settings"} {
		if _, err := datadriver.NewDriver(s.node, datadriver.Config[player]{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if got := nc.NumSubscriptions(); got != 1 {
		t.Fatalf("%d NATS subscriptions for four drivers, want 1", got)
	}
	c := r.Client(t)
	eventually(t, 5*time.Second, "server-a beats", func() bool {
		ok, _ := c.HExists(context.Background(), r.Namespace+":CKPresence", "server-a").Result()
		return ok
	})
	counter := &testsupport.CommandCounter{}
	s.prdb.AddHook(counter)
	time.Sleep(500 * time.Millisecond) // five beats
	if n := counter.RoundTrips(); n < 3 || n > 7 {
		t.Fatalf("%d presence writes in five beats with four drivers, want one per beat (%v)", n, counter.Commands())
	}
}

// With DisableHandoff a Node writes no presence flag, beats nothing and
// subscribes to nothing. (Without a JobID it gets a random one, with
// handoff on: see TestEmptyJobID.)
func TestHandoffOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*datadriver.NodeConfig)
	}{
		{"DisableHandoff", func(c *datadriver.NodeConfig) { c.DisableHandoff = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
			nc := n.Connect(t)
			s := newServer(t, r, "server-a", fast, func(c *datadriver.NodeConfig) { c.NATS = nc }, tc.cfg)
			d := players(t, s)
			if _, err := d.Join(ctxT(t), "user:14"); err != nil {
				t.Fatal(err)
			}
			if rec := recordFields(t, r, "PlayerData", "user:14"); rec["lock.presence"] != "0" {
				t.Fatalf("lock.presence = %q, want 0", rec["lock.presence"])
			}
			if nc.NumSubscriptions() != 0 {
				t.Fatalf("%d subscriptions", nc.NumSubscriptions())
			}
			// It still claims its JobID and beats it, so that no other process
			// can run under it (see TestJobIDIdentity).
			if v, _ := r.Client(t).HGet(context.Background(), r.Namespace+":CKPresence", "server-a").Result(); v == "" {
				t.Fatal("a Node with handoff off did not beat its JobID")
			}
		})
	}
}

// NewNode returns once the NATS server has the Node's subscription: a
// request or a message notification sent the moment it returns reaches it
// (a lost notification would wait for the profile's next save).
func TestNewNodeReturnsSubscribed(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartOwnNATS(t)
	for i := range 20 {
		job := fmt.Sprintf("server-%d", i)
		newServer(t, r, job, fast, withNATS(t, n))
		if subject := handoffSubject(r.Namespace, job); !n.Server.GlobalAccount().SubscriptionInterest(subject) {
			t.Fatalf("NewNode of %s returned before the NATS server had its subscription to %s", job, subject)
		}
	}
}
