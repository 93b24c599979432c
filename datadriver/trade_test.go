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
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/testsupport"
)

var errNoSword = errors.New("the seller has no sword")

// sellSword moves one sword from seller to buyer for 50 coins.
func sellSword(seller, buyer *datadriver.Profile[player]) func(tx *datadriver.Tx) error {
	return func(tx *datadriver.Tx) error {
		s, b := datadriver.TradeData(tx, seller), datadriver.TradeData(tx, buyer)
		if s.Items["sword"] == 0 {
			return errNoSword
		}
		if b.Items == nil {
			b.Items = map[string]int{}
		}
		s.Items["sword"]--
		b.Items["sword"]++
		s.Coins += 50
		b.Coins -= 50
		return nil
	}
}

// stored reads key's data straight from its record.
func stored(tb testing.TB, r *testsupport.Redis, key string) player {
	tb.Helper()
	var p player
	raw := recordFields(tb, r, "PlayerData", key)["data"]
	if raw == "" {
		return p
	}
	if err := msgpack.Unmarshal([]byte(raw), &p); err != nil {
		tb.Fatal(err)
	}
	return p
}

// tradePair joins a seller with one sword and 0 coins and a buyer with 100
// coins, both saved.
func tradePair(t *testing.T, d *datadriver.Driver[player], seller, buyer string) (*datadriver.Profile[player], *datadriver.Profile[player]) {
	t.Helper()
	ctx := ctxT(t)
	s, err := d.Join(ctx, seller)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Join(ctx, buyer)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Update(func(d *player) { d.Coins, d.Items = 0, map[string]int{"sword": 1} })
	_ = b.Update(func(d *player) { d.Coins, d.Items = 100, map[string]int{} })
	for _, p := range []*datadriver.Profile[player]{s, b} {
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s, b
}

func TestTradeCommits(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, b := tradePair(t, d, "seller", "buyer")

	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatalf("Trade: %v", err)
	}
	s.View(func(d *player) {
		if d.Items["sword"] != 0 || d.Coins != 50 {
			t.Fatalf("seller in memory %+v", *d)
		}
	})
	if got := stored(t, r, "buyer"); got.Items["sword"] != 1 || got.Coins != 50 {
		t.Fatalf("buyer's record %+v, want the sword and 50 coins", got)
	}
	if got := stored(t, r, "seller"); got.Items["sword"] != 0 || got.Coins != 50 {
		t.Fatalf("seller's record %+v", got)
	}
	for _, k := range []string{"seller", "buyer"} {
		if rec := recordFields(t, r, "PlayerData", k); rec["trade"] != "" {
			t.Fatalf("%s still marked with trade %s", k, rec["trade"])
		}
	}
	// The journal entry is COMMITTED and expires once both are marked settled.
	c := r.Client(t)
	eventually(t, 5*time.Second, "the journal entry gets its expiry", func() bool {
		keys, _ := c.Keys(ctx, r.Namespace+":trade:*").Result()
		if len(keys) != 1 {
			return false
		}
		st, _ := c.HGet(ctx, keys[0], "state").Result()
		ttl, _ := c.PTTL(ctx, keys[0]).Result()
		return st == "COMMITTED" && ttl > 0
	})

	// A second sale fails inside the function: nothing changes anywhere.
	before := recordFields(t, r, "PlayerData", "seller")["ver"]
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); !errors.Is(err, errNoSword) {
		t.Fatalf("second Trade = %v, want the function's error", err)
	}
	if recordFields(t, r, "PlayerData", "seller")["ver"] != before {
		t.Fatal("a refused trade wrote the seller's record")
	}
}

// inventory is a second profile kind, to trade across drivers.
type inventory struct{ Gems int }

func TestTradeAcrossDrivers(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	pd := players(t, a)
	inv, err := datadriver.NewDriver(a.node, datadriver.Config[inventory]{Name: "Inventory", Defaults: inventory{Gems: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	p, err := pd.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	g, err := inv.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
		pl, iv := datadriver.TradeData(tx, p), datadriver.TradeData(tx, g)
		iv.Gems--
		pl.Coins += 1000
		return nil
	}, p, g)
	if err != nil {
		t.Fatalf("Trade: %v", err)
	}
	if coins(p) != 1100 {
		t.Fatalf("coins %d", coins(p))
	}
	g.View(func(d *inventory) {
		if d.Gems != 2 {
			t.Fatalf("gems %d", d.Gems)
		}
	})
}

func TestTradeRefusals(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	b := newServer(t, r, "server-b")
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	s, u := tradePair(t, da, "s1", "u1")
	other, err := db.Join(ctx, "o1")
	if err != nil {
		t.Fatal(err)
	}
	noop := func(*datadriver.Tx) error { return nil }
	for _, tc := range []struct {
		name    string
		parties []datadriver.TradeParty
		want    error
	}{
		{"one profile", []datadriver.TradeParty{s}, datadriver.ErrInvalidTrade},
		{"the same profile twice", []datadriver.TradeParty{s, s}, datadriver.ErrInvalidTrade},
		{"a profile of another Node", []datadriver.TradeParty{s, other}, datadriver.ErrInvalidTrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := datadriver.Trade(ctx, noop, tc.parties...); !errors.Is(err, tc.want) {
				t.Fatalf("Trade = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("TradeData of a non-participant", func(t *testing.T) {
		err := datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
			datadriver.TradeData(tx, other).Coins = 1e6
			return nil
		}, s, u)
		if !errors.Is(err, datadriver.ErrInvalidTrade) {
			t.Fatalf("Trade = %v, want ErrInvalidTrade", err)
		}
	})
	t.Run("a released profile", func(t *testing.T) {
		x, err := da.Join(ctx, "x1")
		if err != nil {
			t.Fatal(err)
		}
		_ = x.Release(ctx)
		if err := datadriver.Trade(ctx, noop, s, x); !errors.Is(err, datadriver.ErrReleased) {
			t.Fatalf("Trade = %v, want ErrReleased", err)
		}
	})
	t.Run("a profile whose lock was taken", func(t *testing.T) {
		x, err := da.Join(ctx, "x2")
		if err != nil {
			t.Fatal(err)
		}
		// Another server took the lock (as a crash takeover would).
		if err := r.Client(t).HSet(ctx, r.Namespace+":{PlayerData:x2}", "lock.token", "theirs", "lock.job", "server-z").Err(); err != nil {
			t.Fatal(err)
		}
		before := stored(t, r, "s1")
		err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
			datadriver.TradeData(tx, s).Coins += 7
			datadriver.TradeData(tx, x).Coins -= 7
			return nil
		}, s, x)
		if !errors.Is(err, datadriver.ErrTradeAborted) || !errors.Is(err, datadriver.ErrLockLost) {
			t.Fatalf("Trade = %v, want ErrTradeAborted and ErrLockLost", err)
		}
		if got := stored(t, r, "s1"); got.Coins != before.Coins {
			t.Fatalf("the aborted trade changed the other participant: %+v", got)
		}
		if rec := recordFields(t, r, "PlayerData", "s1"); rec["trade"] != "" {
			t.Fatal("the aborted trade left its mark")
		}
		if !errors.Is(x.Err(), datadriver.ErrLockLost) {
			t.Fatalf("the lost profile is still live: %v", x.Err())
		}
		if coins(s) != before.Coins {
			t.Fatalf("the aborted trade changed memory: coins %d", coins(s))
		}
	})
}

func TestTradeDuplicationExploit(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, b1 := tradePair(t, d, "dup-seller", "dup-b1")
	b2, err := d.Join(ctx, "dup-b2")
	if err != nil {
		t.Fatal(err)
	}
	// The same sword to two players at once.
	var wg sync.WaitGroup
	var ok atomic.Int32
	for _, b := range []*datadriver.Profile[player]{b1, b2} {
		wg.Go(func() {
			if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err == nil {
				ok.Add(1)
			} else if !errors.Is(err, errNoSword) {
				t.Errorf("Trade: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d trades of one sword succeeded", ok.Load())
	}
	total := 0
	for _, k := range []string{"dup-seller", "dup-b1", "dup-b2"} {
		total += stored(t, r, k).Items["sword"]
	}
	if total != 1 {
		t.Fatalf("%d swords in Redis after selling one twice", total)
	}
}

func TestTradeLostCommitAnswer(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, b := tradePair(t, d, "lc-seller", "lc-buyer")
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isCommit(cmd) && err == nil {
			return testsupport.ErrInjected // the commit landed; its answer is lost
		}
		return nil
	})
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatalf("Trade with a lost commit answer = %v, want nil: the commit landed", err)
	}
	a.faults.Clear()
	if got := stored(t, r, "lc-buyer"); got.Items["sword"] != 1 {
		t.Fatalf("buyer's record %+v: the landed commit was not settled", got)
	}
	if got := stored(t, r, "lc-seller"); got.Items["sword"] != 0 {
		t.Fatalf("seller's record %+v", got)
	}
}

func TestTradeRoundTrips(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, b := tradePair(t, d, "rt-seller", "rt-buyer")
	// Warm the script cache.
	if err := datadriver.Trade(ctx, func(*datadriver.Tx) error { return nil }, s, b); err != nil {
		t.Fatal(err)
	}
	waitJournalsSettled(t, r, 1)
	counter := &testsupport.CommandCounter{}
	a.rdb.AddHook(counter)
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatal(err)
	}
	if n := counter.RoundTrips(); n != 3 && n != 4 {
		t.Fatalf("a trade of two took %d round trips (%v), want 3: prepare (2 marks + journal), commit, settle (2 images)", n, counter.Commands())
	}
	waitJournalsSettled(t, r, 2)
	if n := counter.RoundTrips(); n != 4 {
		t.Fatalf("%d round trips with the background settle mark (%v), want 4", n, counter.Commands())
	}
}

// waitJournalsSettled waits until n trade journal entries exist and all of
// them have their expiry (every participant marked settled).
func waitJournalsSettled(tb testing.TB, r *testsupport.Redis, n int) {
	tb.Helper()
	c := r.Client(tb)
	ctx := context.Background()
	eventually(tb, 5*time.Second, "the trades' settle marks land", func() bool {
		keys, _ := c.Keys(ctx, r.Namespace+":trade:*").Result()
		if len(keys) != n {
			return false
		}
		for _, k := range keys {
			if ttl, _ := c.PTTL(ctx, k).Result(); ttl <= 0 {
				return false
			}
		}
		return true
	})
}

// TestTradeCrashAtEveryWrite kills the coordinator after each Redis write of
// the protocol in turn, takes both participants over on another server, and
// checks that the sword exists exactly once, each record is all pre-trade or
// all post-trade, and the journal ended ABORTED, or COMMITTED with every
// image written.
func TestTradeCrashAtEveryWrite(t *testing.T) {
	// Writes of a trade of two: prepare x2, journal begin, commit, settle x2.
	for writes := range 7 {
		t.Run(fmt.Sprintf("crash after %d writes", writes), func(t *testing.T) {
			r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
			crash := &testsupport.CrashHook{}
			a := newServer(t, r, "server-a", fast, withNATS(t, n))
			a.rdb.AddHook(crash)
			b := newServer(t, r, "server-b", fast, withNATS(t, n))
			da := players(t, a)
			db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
			ctx := ctxT(t)
			s, u := tradePair(t, da, "c-seller", "c-buyer")
			// Warm the script cache so that no write is an EVAL retry.
			warm1, warm2 := tradePair(t, da, "w1", "w2")
			if err := datadriver.Trade(ctx, sellSword(warm1, warm2), warm1, warm2); err != nil {
				t.Fatal(err)
			}
			waitJournalsSettled(t, r, 1)

			crash.CrashAfter(writes)
			err := datadriver.Trade(ctx, sellSword(s, u), s, u)
			t.Logf("coordinator's Trade answered %v", err)
			crash.CrashAfter(0) // dead from here on, whatever is left
			_ = a.node.Close(ctx)

			var ps []*datadriver.Profile[player]
			for _, k := range []string{"c-seller", "c-buyer"} {
				p, err := db.Join(ctx, k)
				if err != nil {
					t.Fatalf("take over %s: %v", k, err)
				}
				ps = append(ps, p)
			}
			var sv, bv player
			ps[0].View(func(d *player) { sv = *d })
			ps[1].View(func(d *player) { bv = *d })
			pre := sv.Items["sword"] == 1 && sv.Coins == 0 && bv.Items["sword"] == 0 && bv.Coins == 100
			post := sv.Items["sword"] == 0 && sv.Coins == 50 && bv.Items["sword"] == 1 && bv.Coins == 50
			if !pre && !post {
				t.Fatalf("seller %+v, buyer %+v: neither all pre-trade nor all post-trade", sv, bv)
			}
			for _, k := range []string{"c-seller", "c-buyer"} {
				if rec := recordFields(t, r, "PlayerData", k); rec["trade"] != "" {
					t.Fatalf("%s still marked with trade %s after recovery", k, rec["trade"])
				}
			}
			// The records agree with the profiles.
			if got := stored(t, r, "c-seller").Items["sword"] + stored(t, r, "c-buyer").Items["sword"]; got != 1 {
				t.Fatalf("%d swords in Redis", got)
			}
			c := r.Client(t)
			keys, _ := c.Keys(ctx, r.Namespace+":trade:*").Result()
			for _, k := range keys {
				m, _ := c.HGetAll(ctx, k).Result()
				switch m["state"] {
				case "ABORTED", "COMMITTED":
				default:
					t.Fatalf("journal %s left in state %q", k, m["state"])
				}
				var p0 struct {
					K string `msgpack:"k"`
				}
				_ = msgpack.Unmarshal([]byte(m["p0"]), &p0)
				if p0.K != "c-buyer" && p0.K != "c-seller" {
					continue // the warm-up trade, or a tombstone
				}
				if (m["state"] == "COMMITTED") != post {
					t.Fatalf("journal %s, but the records are post-trade=%t", m["state"], post)
				}
			}
			// Before the commit lands the trade must come out aborted; once it
			// has landed (the fourth write), committed.
			if wantPost := writes >= 4; post != wantPost {
				t.Fatalf("post-trade = %t after %d writes, want %t", post, writes, wantPost)
			}
		})
	}
}

func TestTradeRejoinElsewhereMidTrade(t *testing.T) {
	pr := newPair(t)
	r, a, b := pr.r, pr.a, pr.b
	da, db := players(t, a), players(t, b)
	ctx := ctxT(t)
	s, u := tradePair(t, da, "m-seller", "m-buyer")

	// Hold the commit until the buyer's rejoin on B is waiting.
	inCommit, proceed := holdFirst(a, isCommit)
	traded := make(chan error, 1)
	go func() { traded <- datadriver.Trade(ctx, sellSword(s, u), s, u) }()
	<-inCommit
	joined := joinAsync(t, ctx, db, "m-buyer")
	time.Sleep(100 * time.Millisecond) // B asks A; A's release waits for the trade
	proceed()
	if err := <-traded; err != nil {
		t.Fatalf("Trade: %v", err)
	}
	pb := <-joined
	if pb == nil {
		t.FailNow()
	}
	pb.View(func(d *player) {
		if d.Items["sword"] != 1 || d.Coins != 50 {
			t.Fatalf("B got the buyer as %+v, want post-trade", *d)
		}
	})
	if got := stored(t, r, "m-seller").Items["sword"]; got != 0 {
		t.Fatalf("seller's record has %d swords", got)
	}
}

func TestTradeHoldsSavesAndUpdates(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, u := tradePair(t, d, "h-seller", "h-buyer")
	inCommit, proceed := holdFirst(a, isCommit)
	traded := make(chan error, 1)
	go func() { traded <- datadriver.Trade(ctx, sellSword(s, u), s, u) }()
	<-inCommit

	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.Save(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Save during a trade = %v, want to wait (and give up with its context)", err)
	}
	updated := make(chan struct{})
	go func() {
		_ = s.Update(func(d *player) { d.Coins += 1 })
		close(updated)
	}()
	select {
	case <-updated:
		t.Fatal("Update ran in the middle of a trade")
	case <-time.After(50 * time.Millisecond):
	}
	proceed()
	if err := <-traded; err != nil {
		t.Fatal(err)
	}
	<-updated
	if coins(s) != 51 {
		t.Fatalf("coins %d: the update waiting for the trade must apply on top of it (50+1)", coins(s))
	}
	if err := s.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, r, "h-seller"); got.Coins != 51 || got.Items["sword"] != 0 {
		t.Fatalf("seller's record %+v", got)
	}
}

func TestTradeOutcomeUnknown(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	s, u := tradePair(t, d, "q-seller", "q-buyer")
	// The commit lands, then the backend goes away before anything else.
	var down atomic.Bool
	a.faults.SetBefore(func(context.Context, redis.Cmder) error {
		if down.Load() {
			return testsupport.ErrInjected
		}
		return nil
	})
	a.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if isCommit(cmd) && err == nil {
			down.Store(true)
			return testsupport.ErrInjected
		}
		return nil
	})
	err := datadriver.Trade(ctx, sellSword(s, u), s, u)
	if !errors.Is(err, datadriver.ErrTradeOutcomeUnknown) {
		t.Fatalf("Trade = %v, want ErrTradeOutcomeUnknown", err)
	}
	if err := s.Update(func(d *player) { d.Coins++ }); !errors.Is(err, datadriver.ErrTradePending) {
		t.Fatalf("Update while the outcome is unknown = %v, want ErrTradePending", err)
	}
	if err := s.Save(ctx); err == nil {
		t.Fatal("Save while the backend is down succeeded")
	}
	down.Store(false)
	a.faults.Clear()
	for _, p := range []*datadriver.Profile[player]{s, u} {
		if err := p.Save(ctx); err != nil {
			t.Fatalf("Save once the backend is back: %v", err)
		}
	}
	// The commit had landed: both come out post-trade, in memory and in Redis.
	if coins(s) != 50 || coins(u) != 50 {
		t.Fatalf("coins in memory %d and %d, want 50 and 50", coins(s), coins(u))
	}
	if st, bu := stored(t, r, "q-seller"), stored(t, r, "q-buyer"); st.Items["sword"]+bu.Items["sword"] != 1 || bu.Items["sword"] != 1 {
		t.Fatalf("records seller %+v buyer %+v", st, bu)
	}
	for _, k := range []string{"q-seller", "q-buyer"} {
		if rec := recordFields(t, r, "PlayerData", k); rec["trade"] != "" {
			t.Fatalf("%s still marked", k)
		}
	}
	if err := s.Update(func(d *player) { d.Coins++ }); err != nil {
		t.Fatalf("Update after resolution: %v", err)
	}
}

// A load that finds a trade mark resolves it from the journal before the
// profile is handed out, for every state the journal can be in.
func TestTradeRecoveryByJournalState(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newServer(t, r, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	c := r.Client(t)
	j := tradejournal.New(c, r.Namespace, time.Hour)
	image, _ := msgpack.Marshal(player{Coins: 999, Items: map[string]int{"traded": 1}})
	for _, tc := range []struct {
		name      string
		journal   func(id string) // sets the journal up
		wantCoins int
		wantState tradejournal.State
	}{
		{"no journal entry: aborted with a tombstone", func(string) {}, 5, tradejournal.Aborted},
		{"PREPARED: aborted by CAS", func(id string) { beginJournal(t, r, j, id, image) }, 5, tradejournal.Aborted},
		{"ABORTED: the mark is cleared", func(id string) {
			beginJournal(t, r, j, id, image)
			if err := j.Abort(ctx, id); err != nil {
				t.Fatal(err)
			}
		}, 5, tradejournal.Aborted},
		{"COMMITTED: the image is written", func(id string) {
			beginJournal(t, r, j, id, image)
			if err := j.Commit(ctx, id); err != nil {
				t.Fatal(err)
			}
		}, 999, tradejournal.Committed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "rec-" + strings.Fields(tc.name)[0]
			p, err := d.Join(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Update(func(d *player) { d.Coins = 5 })
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			id := "trade-" + key
			tc.journal(id)
			// The coordinator crashed after marking the record.
			if err := c.HSet(ctx, record.Key(r.Namespace, "PlayerData", key), "trade", id).Err(); err != nil {
				t.Fatal(err)
			}
			q, err := d.Join(ctx, key)
			if err != nil {
				t.Fatalf("load of a marked record: %v", err)
			}
			if coins(q) != tc.wantCoins {
				t.Fatalf("coins %d, want %d", coins(q), tc.wantCoins)
			}
			if rec := recordFields(t, r, "PlayerData", key); rec["trade"] != "" {
				t.Fatalf("the mark stayed: %q", rec["trade"])
			}
			e, err := j.Read(ctx, id)
			if err != nil || e.State != tc.wantState {
				t.Fatalf("journal %+v, %v; want %s", e, err, tc.wantState)
			}
		})
	}
}

// beginJournal opens trade id as PREPARED with one participant, key
// "rec-..." of PlayerData.
func beginJournal(tb testing.TB, r *testsupport.Redis, j *tradejournal.Journal, id string, image []byte) {
	tb.Helper()
	key := strings.TrimPrefix(id, "trade-")
	err := j.Begin(context.Background(), id, "server-gone",
		[]tradejournal.Participant{{Driver: "PlayerData", Key: key, Image: image}})
	if err != nil {
		tb.Fatal(err)
	}
}
