package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradescript"
	"github.com/ckernel/playerdata/testsupport"
)

// The Redis Cluster tests: the scenarios of the single-Redis tests (handoff,
// crash takeover, trades, messages, history) on a Redis Cluster of three
// masters, each game server's Redis a *redis.ClusterClient, with the same
// outcomes asserted. Every script call is audited (cluster_helpers_test.go):
// each test ends by checking that every call it made named keys of one slot
// and went straight to the master serving it. TestClusterScriptsTouchOneSlot
// runs every scenario on one cluster and checks the multi-key steps.

// clusterScenario is one scenario, run on a scope of its own.
type clusterScenario struct {
	name string
	run  func(t *testing.T, sc *clusterScope)
}

// clusterScenarios are the scenarios, by name (letters only: each names a
// namespace, which is also a NATS subject token; none is a prefix of
// another, so the audit tells their calls apart).
var clusterScenarios = []clusterScenario{
	{"handoff", clusterHandoff},
	{"crash", clusterCrashTakeover},
	{"trade", clusterTrade},
	{"recovery", clusterTradeRecovery},
	{"messages", clusterMessages},
	{"history", clusterHistory},
	{"move", clusterMove},
	{"pipelined", clusterPipelined},
	{"stalled", clusterStalled},
}

// runClusterScenario runs one scenario on a cluster of its own and checks
// its script calls.
func runClusterScenario(t *testing.T, name string) {
	i := slices.IndexFunc(clusterScenarios, func(s clusterScenario) bool { return s.name == name })
	env := startClusterEnv(t)
	sc := env.scope(name)
	start := time.Now()
	clusterScenarios[i].run(t, sc)
	t.Logf("scenario %s ran in %s", name, time.Since(start).Round(time.Millisecond))
	v := env.audit.checkOneSlot(t, sc.ns)
	t.Logf("script calls, each of one slot and sent to its master: %s", v.summary())
}

func TestClusterHandoff(t *testing.T)       { runClusterScenario(t, "handoff") }
func TestClusterCrashTakeover(t *testing.T) { runClusterScenario(t, "crash") }
func TestClusterTrade(t *testing.T)         { runClusterScenario(t, "trade") }
func TestClusterTradeRecovery(t *testing.T) { runClusterScenario(t, "recovery") }
func TestClusterMessages(t *testing.T)      { runClusterScenario(t, "messages") }
func TestClusterHistory(t *testing.T)       { runClusterScenario(t, "history") }
func TestClusterPipelined(t *testing.T)     { runClusterScenario(t, "pipelined") }
func TestClusterStalled(t *testing.T)       { runClusterScenario(t, "stalled") }

// A stale connection handed over between two Nodes over NATS: B's join asks
// A, A ends the session and saves, B loads A's latest data. Then back to A.
func clusterHandoff(t *testing.T, sc *clusterScope) {
	a, b := sc.server(t, "server-a"), sc.server(t, "server-b")
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
	t.Logf("stale connection handed over A→B in %s on the Redis Cluster (record on master %d)",
		time.Since(start).Round(time.Microsecond), sc.masterOf(sc.recordKey("user:1")))
	pb.View(func(d *player) {
		if d.Coins != 42 || d.Name != "left a" {
			t.Fatalf("B got %+v, want A's latest data and its leave cleanup", *d)
		}
	})
	awaitHandedOff(t, pa, &ka)
	if ka.joined.Load() != 1 {
		t.Fatalf("A's session kicked %d times with %q, want 1", ka.joined.Load(), datadriver.ReasonJoinedElsewhere)
	}
	if !errors.Is(pa.Err(), datadriver.ErrReleased) {
		t.Fatalf("A's profile Err = %v, want ErrReleased", pa.Err())
	}
	requestAnswered(t, b)
	if pa.Epoch() != 1 || pb.Epoch() != 2 {
		t.Fatalf("epochs A %d, B %d; want 1 then 2", pa.Epoch(), pb.Epoch())
	}
	if rec := sc.record(t, "user:1"); rec["lock.job"] != "server-b" || rec["epoch"] != "2" {
		t.Fatalf("record lock.job %q epoch %q, want server-b and 2", rec["lock.job"], rec["epoch"])
	}

	// And back: B's session is the stale one now.
	_ = pb.Update(func(d *player) { d.Coins++ })
	start = time.Now()
	pa2, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatalf("A's rejoin: %v", err)
	}
	t.Logf("handed back B→A in %s", time.Since(start).Round(time.Microsecond))
	if coins(pa2) != 43 || pa2.Epoch() != 3 {
		t.Fatalf("A's rejoin: coins %d epoch %d, want 43 and 3", coins(pa2), pa2.Epoch())
	}
}

// A crashes without releasing; B takes over once A's presence (in its shard,
// on whichever master serves it) has expired, with exactly A's last landed
// save.
func clusterCrashTakeover(t *testing.T, sc *clusterScope) {
	// The crashing server beats into a tagged shard ("<key>:{n}") on another
	// master than the record: B's presence reads and its acquire go to two
	// masters.
	const key = "user:3"
	job, shard := sc.jobOnTaggedShard("server-a", sc.recordKey(key))
	a, b := sc.server(t, job), sc.server(t, "server-b")
	da := players(t, a)
	db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
	ctx := ctxT(t)

	pa, err := da.Join(ctx, key)
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

	pb, err := db.Join(ctx, key)
	if err != nil {
		t.Fatalf("B's join after A crashed: %v", err)
	}
	took := time.Since(crashed)
	t.Logf("crash taken over %s after the crash (%s's presence shard %s on master %d, record on master %d)",
		took.Round(time.Millisecond), job, shard, sc.masterOf(shard), sc.masterOf(sc.recordKey(key)))
	if coins(pb) != 7 {
		t.Fatalf("B got coins %d, want 7: exactly A's last landed save", coins(pb))
	}
	if pb.Epoch() != 2 {
		t.Fatalf("B's epoch %d, want 2", pb.Epoch())
	}
	// Never early: A's presence lives PresenceTTL after its last beat, at
	// most one Beat before the crash.
	if min := 800*time.Millisecond - 100*time.Millisecond; took < min {
		t.Fatalf("taken over %s after the crash, before A's presence could expire (%s)", took, min)
	}
	if want := fmt.Sprintf("took the lock of %s from server %s, which stopped beating presence", key, job); !strings.Contains(b.logs.String(), want) {
		t.Fatalf("no takeover warning in B's log:\n%s", b.logs)
	}
}

// A trade between two profiles whose records live on different masters: all
// or nothing, exactly once, and each step a set of one-slot calls.
func clusterTrade(t *testing.T, sc *clusterScope) {
	a := sc.server(t, "server-a")
	d := players(t, a)
	ctx := ctxT(t)
	seller, buyer := sc.profilesOnDifferentMasters("PlayerData", "trader")
	ms, mb := sc.masterOf(sc.recordKey(seller)), sc.masterOf(sc.recordKey(buyer))
	if ms == mb {
		t.Fatalf("%s and %s on the same master %d", seller, buyer, ms)
	}
	s, b := tradePair(t, d, seller, buyer)
	before := len(sc.audit.of(sc.ns).calls)

	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); err != nil {
		t.Fatalf("Trade across masters %d and %d: %v", ms, mb, err)
	}
	s.View(func(d *player) {
		if d.Items["sword"] != 0 || d.Coins != 50 {
			t.Fatalf("seller in memory %+v", *d)
		}
	})
	gs, gb := clusterStored[player](t, sc, seller), clusterStored[player](t, sc, buyer)
	if gs.Items["sword"] != 0 || gs.Coins != 50 || gb.Items["sword"] != 1 || gb.Coins != 50 {
		t.Fatalf("records: seller %+v, buyer %+v; want the sword moved once for 50 coins", gs, gb)
	}
	for _, k := range []string{seller, buyer} {
		if rec := sc.record(t, k); rec["trade"] != "" {
			t.Fatalf("%s still marked with trade %s", k, rec["trade"])
		}
	}

	// The steps, as the audit saw them.
	v := sc.audit.of(sc.ns)
	calls := v.calls[before:]
	var journal string
	for _, c := range calls {
		if strings.HasPrefix(c.Script, "trade-") {
			if journal == "" {
				journal = c.Keys[0]
			}
			if c.Keys[0] != journal || len(c.Keys) != 1 {
				t.Fatalf("journal calls name %v and %s: want the one key <ns>:trade:{<id>}", c.Keys, journal)
			}
		}
	}
	if !strings.HasPrefix(journal, sc.ns+":trade:{") || !strings.HasSuffix(journal, "}") {
		t.Fatalf("journal key %q, want %s:trade:{<id>}", journal, sc.ns)
	}
	checkTradePipelines(t, sc, v.pipelines, journal, seller, buyer)

	// The journal entry is COMMITTED and expires once both are marked settled.
	eventually(t, 5*time.Second, "the journal entry gets its expiry", func() bool {
		st, _ := sc.admin.HGet(ctx, journal, "state").Result()
		ttl, _ := sc.admin.PTTL(ctx, journal).Result()
		return st == "COMMITTED" && ttl > 0
	})
	t.Logf("trade: seller's record on master %d, buyer's on master %d, journal %s on master %d",
		ms, mb, journal, sc.masterOf(journal))

	// A second sale fails inside the function: nothing changes anywhere.
	ver := sc.record(t, seller)["ver"]
	if err := datadriver.Trade(ctx, sellSword(s, b), s, b); !errors.Is(err, errNoSword) {
		t.Fatalf("second Trade = %v, want the function's error", err)
	}
	if sc.record(t, seller)["ver"] != ver {
		t.Fatal("a refused trade wrote the seller's record")
	}
}

// checkTradePipelines finds the trade's prepare and settle pipelines and
// checks their shape: one-key calls, the records' calls each on its own
// master, the journal's begin in the prepare pipeline.
func checkTradePipelines(t *testing.T, sc *clusterScope, pipelines [][]scriptCall, journal, seller, buyer string) {
	t.Helper()
	records := []string{sc.recordKey(seller), sc.recordKey(buyer)}
	var prepare, settle []scriptCall
	for _, p := range pipelines {
		switch {
		case slices.ContainsFunc(p, func(c scriptCall) bool { return c.Script == tradescript.NameBegin && c.Keys[0] == journal }):
			prepare = p
		case slices.ContainsFunc(p, func(c scriptCall) bool { return c.Mode == string(record.ModeSettle) }) &&
			slices.ContainsFunc(p, func(c scriptCall) bool { return c.Keys[0] == records[0] }):
			settle = p
		}
	}
	if prepare == nil || settle == nil {
		t.Fatalf("no prepare or settle pipeline among %v", pipelines)
	}
	masters := func(p []scriptCall, script string) []int {
		var ms []int
		for _, c := range p {
			if c.Script == script && slices.Contains(records, c.Keys[0]) {
				ms = append(ms, sc.masterOf(c.Keys[0]))
			}
		}
		return ms
	}
	if ms := masters(prepare, record.ScriptPrepare); len(ms) != 2 || ms[0] == ms[1] {
		t.Fatalf("prepare pipeline %v: want one prepare per record, on two masters (got masters %v)", prepare, ms)
	}
	if ms := masters(settle, record.ScriptSave); len(ms) != 2 || ms[0] == ms[1] {
		t.Fatalf("settle pipeline %v: want one settle per record, on two masters (got masters %v)", settle, ms)
	}
	for _, p := range [][]scriptCall{prepare, settle} {
		for _, c := range p {
			if c.Script == record.ScriptPrepare && len(c.Keys) != 1 {
				t.Fatalf("%s: a prepare names one key, the record", c)
			}
		}
	}
	t.Logf("prepare pipeline: %s", describePipeline(sc, prepare))
	t.Logf("settle pipeline:  %s", describePipeline(sc, settle))
}

// describePipeline lists a pipeline's calls with the master of each.
func describePipeline(sc *clusterScope, p []scriptCall) string {
	var parts []string
	for _, c := range p {
		name := c.Script
		if c.Mode != "" {
			name += "/" + c.Mode
		}
		parts = append(parts, fmt.Sprintf("%s(slot %d, master %d)", name, c.Slots[0], sc.masterOf(c.Keys[0])))
	}
	return strings.Join(parts, ", ")
}

// crashAt is a go-redis hook that kills its client for good at a chosen
// command: just before a command matching before is sent (it fails unsent),
// or once a command matching after has landed. Every later command and
// pipeline fails unsent, as after a process death at that point.
type crashAt struct {
	before, after func(cmd redis.Cmder) bool
	dead          atomic.Bool
}

func (h *crashAt) DialHook(next redis.DialHook) redis.DialHook { return next }

// admit reports whether cmd may be sent, killing the client when it matches
// before.
func (h *crashAt) admit(cmd redis.Cmder) bool {
	if h.before != nil && h.before(cmd) {
		h.dead.Store(true)
	}
	if h.dead.Load() {
		cmd.SetErr(testsupport.ErrInjected)
		return false
	}
	return true
}

// landed kills the client once cmd, matching after, has landed.
func (h *crashAt) landed(cmd redis.Cmder) {
	if h.after != nil && cmd.Err() == nil && h.after(cmd) {
		h.dead.Store(true)
	}
}

func (h *crashAt) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.admit(cmd) {
			return testsupport.ErrInjected
		}
		err := next(ctx, cmd)
		h.landed(cmd)
		return err
	}
}

func (h *crashAt) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if !h.admit(c) {
				for _, c := range cmds {
					c.SetErr(testsupport.ErrInjected)
				}
				return testsupport.ErrInjected
			}
		}
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.landed(c)
		}
		return err
	}
}

// The coordinator of a trade across two masters dies between two steps; the
// participants are taken over on another server, whose loads resolve the
// trade from the journal: aborted when the commit never landed, settled when
// it did. The sword exists exactly once either way.
func clusterTradeRecovery(t *testing.T, sc *clusterScope) {
	for _, tc := range []struct {
		name  string
		crash *crashAt
		post  bool // the trade must come out applied
	}{
		{"prepared, commit lost", &crashAt{before: isCommit}, false},
		{"committed, settle lost", &crashAt{after: isCommit}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := sc.sub(strings.NewReplacer(" ", "", ",", "").Replace(tc.name))
			a := sc.serverWith(t, "server-a", []redis.Hook{tc.crash})
			b := sc.server(t, "server-b")
			da := players(t, a)
			db := players(t, b, func(c *datadriver.Config[player]) { c.LockWait = 10 * time.Second })
			ctx := ctxT(t)
			seller, buyer := sc.profilesOnDifferentMasters("PlayerData", "c")
			s, u := tradePair(t, da, seller, buyer)

			err := datadriver.Trade(ctx, sellSword(s, u), s, u)
			t.Logf("coordinator's Trade answered %v", err)
			if tc.post && err != nil {
				t.Fatalf("Trade = %v: the commit landed and its answer came back", err)
			}
			if !tc.post && !errors.Is(err, datadriver.ErrTradeOutcomeUnknown) {
				t.Fatalf("Trade = %v, want ErrTradeOutcomeUnknown (commit and abort both unsent)", err)
			}
			closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = a.node.Close(closeCtx)
			cancel()

			start := time.Now()
			var got []player
			for _, k := range []string{seller, buyer} {
				p, err := db.Join(ctx, k)
				if err != nil {
					t.Fatalf("take over %s: %v", k, err)
				}
				var d player
				p.View(func(x *player) { d = *x })
				got = append(got, d)
			}
			t.Logf("both taken over and resolved in %s", time.Since(start).Round(time.Millisecond))
			sv, bv := got[0], got[1]
			pre := sv.Items["sword"] == 1 && sv.Coins == 0 && bv.Items["sword"] == 0 && bv.Coins == 100
			post := sv.Items["sword"] == 0 && sv.Coins == 50 && bv.Items["sword"] == 1 && bv.Coins == 50
			if (tc.post && !post) || (!tc.post && !pre) {
				t.Fatalf("seller %+v, buyer %+v: want all %s", sv, bv, map[bool]string{true: "post-trade", false: "pre-trade"}[tc.post])
			}
			for _, k := range []string{seller, buyer} {
				if rec := sc.record(t, k); rec["trade"] != "" {
					t.Fatalf("%s still marked with trade %s after recovery", k, rec["trade"])
				}
			}
			if n := clusterStored[player](t, sc, seller).Items["sword"] + clusterStored[player](t, sc, buyer).Items["sword"]; n != 1 {
				t.Fatalf("%d swords in Redis, want exactly 1", n)
			}
			var journal string
			for _, c := range sc.audit.of(sc.ns).calls {
				if c.Script == tradescript.NameBegin {
					journal = c.Keys[0]
				}
			}
			state, err := sc.admin.HGet(ctx, journal, "state").Result()
			if want := map[bool]string{true: "COMMITTED", false: "ABORTED"}[tc.post]; err != nil || state != want {
				t.Fatalf("journal %s state %q (%v), want %s", journal, state, err, want)
			}
		})
	}
}

// Messages on the cluster: to an offline profile (stored in its inbox, on the
// record's master), to a live one on another server (notified over NATS),
// and across a crash; each applied exactly once.
func clusterMessages(t *testing.T, sc *clusterScope) {
	a, b := sc.server(t, "server-a"), sc.server(t, "server-b")
	da, db := giftDriver(t, a), giftDriver(t, b)
	ctx := ctxT(t)

	t.Run("offline", func(t *testing.T) {
		if _, err := da.Send(ctx, "user:1", gift{Coins: 25}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Send(ctx, "user:1", gift{Coins: 5}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		p, err := da.Join(ctx, "user:1")
		if err != nil {
			t.Fatal(err)
		}
		if w := walletOf(p); w.Coins != 30 || w.Received != 2 {
			t.Fatalf("after Join: %+v, want both gifts applied", w)
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sc.inboxLen(t, "user:1"); n != 0 {
			t.Fatalf("inbox %d after the release, want 0", n)
		}
		q, err := db.Join(ctx, "user:1")
		if err != nil {
			t.Fatal(err)
		}
		if w := walletOf(q); w.Coins != 30 || w.Received != 2 {
			t.Fatalf("after rejoining on B: %+v, want the gifts exactly once", w)
		}
	})

	t.Run("live on another server", func(t *testing.T) {
		p, err := db.Join(ctx, "user:2") // B holds the profile
		if err != nil {
			t.Fatal(err)
		}
		notified := a.node.HandoffStats().NotifiesSent
		start := time.Now()
		if _, err := da.Send(ctx, "user:2", gift{Coins: 7}, datadriver.SendOptions{}); err != nil { // sent from A
			t.Fatal(err)
		}
		received(t, p, 1, "B")
		t.Logf("applied on the holder %s after Send was called", time.Since(start).Round(time.Microsecond))
		if n := a.node.HandoffStats().NotifiesSent - notified; n != 1 {
			t.Errorf("A sent %d notifications, want 1", n)
		}
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sc.inboxLen(t, "user:2"); n != 0 {
			t.Fatalf("inbox %d after B's save, want 0", n)
		}
		q, err := da.Join(ctx, "user:2") // the player moves to A
		if err != nil {
			t.Fatal(err)
		}
		if w := walletOf(q); w.Coins != 7 || w.Received != 1 {
			t.Fatalf("on A: %+v, want the gift exactly once", w)
		}
	})

	t.Run("across a crash", func(t *testing.T) {
		p, err := da.Join(ctx, "user:3")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(w *wallet) { w.Coins = 100 })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Send(ctx, "user:3", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		received(t, p, 1, "A")
		crash(t, a) // before any save wrote it
		q, err := db.Join(ctx, "user:3")
		if err != nil {
			t.Fatal(err)
		}
		if w := walletOf(q); w.Coins != 101 || w.Received != 1 {
			t.Fatalf("on B after A crashed: %+v, want the last save (100) plus the gift once", w)
		}
	})

	t.Run("dead letters", func(t *testing.T) {
		c := sc.server(t, "server-c")
		var refuse atomic.Bool
		refuse.Store(true)
		dc := poisonDriver(t, c, &refuse, 1)
		p, err := dc.Join(ctx, "user:4")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.Send(ctx, "user:4", gift{Coins: 13}, datadriver.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		rk := sc.recordKey("user:4")
		eventually(t, 5*time.Second, "the poison dead-lettered", func() bool {
			n, _ := sc.admin.XLen(ctx, record.DeadKey(rk)).Result()
			return n == 1
		})
		refuse.Store(false)
		// An operator's tool replays it, through a cluster client as the CLI does.
		if rep, err := record.Replay(ctx, c.rdb, rk, nil); err != nil || rep.Moved != 1 || rep.Holder.Job != "server-c" {
			t.Fatalf("replay = %+v, %v", rep, err)
		}
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the replayed message applied", func() bool { return walletOf(p).Coins == 13 })
	})

	t.Run("a key names one message across masters", func(t *testing.T) {
		// Two profiles on different masters, the key's claim on a third
		// slot: the key sent to one is refused for the other.
		one, two := sc.profilesOnDifferentMasters("PlayerData", "keyed:")
		dc := giftDriver(t, sc.server(t, "server-e")) // A crashed above
		first, err := dc.Send(ctx, one, gift{Coins: 3}, datadriver.SendOptions{IdempotencyKey: "order-c"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Send(ctx, two, gift{Coins: 3}, datadriver.SendOptions{IdempotencyKey: "order-c"}); !errors.Is(err,
			datadriver.ErrIdempotencyConflict) {
			t.Fatalf("order-c to %s after %s = %v, want ErrIdempotencyConflict", two, one, err)
		}
		if n := sc.inboxLen(t, two); n != 0 {
			t.Fatalf("%s's inbox holds %d messages after the refused send, want 0", two, n)
		}
		if id, err := db.Send(ctx, one, gift{Coins: 3}, datadriver.SendOptions{IdempotencyKey: "order-c"}); err != nil || id != first {
			t.Fatalf("a retry of order-c to %s from B = %q, %v; want the first id %s", one, id, err, first)
		}
	})

	t.Run("a broken record repaired", func(t *testing.T) {
		c := sc.server(t, "server-d")
		dc := giftDriver(t, c)
		rk := sc.recordKey("user:5")
		sc.admin.HSet(ctx, rk, "fmt", record.Format, "ver", "x", "epoch", "3")
		if _, err := dc.Load(ctx, "user:5", datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrCorruptRecord) {
			t.Fatalf("Load of a broken record = %v, want ErrCorruptRecord", err)
		}
		// The operator's repair, through a cluster client as the CLI does.
		if res, err := record.Repair(ctx, c.rdb, rk, record.RepairArgs{Skew: time.Minute}); err != nil || len(res.Changed) != 1 {
			t.Fatalf("repair = %+v, %v", res, err)
		}
		p, err := dc.Load(ctx, "user:5", datadriver.LoadOptions{})
		if err != nil || p.Epoch() != 4 {
			t.Fatalf("Load after the repair = %v (epoch %d), want epoch 4", err, p.Epoch())
		}
		_ = p.Release(ctx)
		// The operator's free of a lock that names no holder (once no live
		// server can hold its token), fenced by that token.
		sc.admin.HSet(ctx, rk, "lock.token", "tok-x", "lock.job", "", "lock.at", "1")
		if res, err := record.Free(ctx, c.rdb, rk, record.FreeArgs{Token: "tok-x"}); err != nil || res.Outcome != record.Freed {
			t.Fatalf("free = %+v, %v", res, err)
		}
	})
}

// History on the cluster: versions kept in <record>:hist (the record's
// slot), listed, read without the lock from another server, restored; then
// the profile is wiped (record, inbox and history in one call).
func clusterHistory(t *testing.T, sc *clusterScope) {
	a := sc.server(t, "server-a")
	const every = 10 * time.Millisecond
	d := players(t, a, func(c *datadriver.Config[player]) { c.HistoryEvery = every })
	ctx := ctxT(t)
	const key = "user:h"
	rk := sc.recordKey(key)
	for _, k := range []string{record.InboxKey(rk), record.HistoryKey(rk)} {
		if testsupport.KeySlot(k) != testsupport.KeySlot(rk) {
			t.Fatalf("%s is in slot %d, the record %s in slot %d", k, testsupport.KeySlot(k), rk, testsupport.KeySlot(rk))
		}
	}

	p, err := d.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for c := 1; c <= 3; c++ {
		if c > 1 {
			time.Sleep(every + 5*time.Millisecond) // the history interval passes
		}
		_ = p.Update(func(d *player) { d.Coins = c })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := d.Versions(ctx, key)
	if err != nil || len(vs) != 3 || !vs[0].Current {
		t.Fatalf("versions %+v, %v; want the current one and two kept", vs, err)
	}
	if n, err := sc.admin.HLen(ctx, record.HistoryKey(rk)).Result(); err != nil || n == 0 {
		t.Fatalf("history hash %s: %d fields, %v", record.HistoryKey(rk), n, err)
	}

	reader := sc.server(t, "support-tool")
	rd := players(t, reader)
	for i, want := range []int{3, 2, 1} {
		got, err := rd.ReadVersion(ctx, key, vs[i].At)
		if err != nil || got.Coins != want {
			t.Fatalf("ReadVersion(version %d) = %d coins, %v; want %d", vs[i].Ver, got.Coins, err, want)
		}
	}
	if err := p.Update(func(d *player) { d.Coins = 4 }); err != nil {
		t.Fatalf("the player was disturbed by the reads: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// ReadVersion finds a version by its write time, in ms: the restore's
	// must come after the release's to read the latter back below.
	time.Sleep(2 * time.Millisecond)

	r, err := rd.RestoreAt(ctx, key, vs[2].At, datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt: %v", err)
	}
	if coins(r) != 1 || r.Epoch() != 2 {
		t.Fatalf("restored coins %d epoch %d, want 1 and 2", coins(r), r.Epoch())
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clusterStored[player](t, sc, key); got.Coins != 1 {
		t.Fatalf("record after the restore %+v, want 1 coin", got)
	}
	after, err := rd.Versions(ctx, key)
	if err != nil || len(after) < 4 || after[0].Ver <= vs[0].Ver {
		t.Fatalf("versions after the restore %+v, %v; want the restore on top and the data it replaced kept", after, err)
	}
	if got, err := rd.ReadVersion(ctx, key, after[1].At); err != nil || got.Coins != 4 {
		t.Fatalf("the version the restore replaced = %d coins, %v; want 4", got.Coins, err)
	}
	t.Logf("history: record, inbox and history in slot %d on master %d; %d versions after the restore",
		testsupport.KeySlot(rk), sc.masterOf(rk), len(after))

	if err := rd.Wipe(ctx, key); err != nil {
		t.Fatalf("Wipe: %v", err)
	}
	if n, err := sc.admin.Exists(ctx, rk).Result(); err != nil || n != 0 {
		t.Fatalf("record after Wipe: exists %d, %v", n, err)
	}
	if n, err := sc.admin.Exists(ctx, record.HistoryKey(rk)).Result(); err != nil || n != 0 {
		t.Fatalf("history after Wipe: exists %d, %v", n, err)
	}
}

// Every script call the library makes in all the scenarios above, on one
// cluster, names keys of one slot and goes straight to the master serving
// it (no MOVED, no CROSSSLOT); every script the library runs in service is
// among them; and the multi-key steps (trade prepare and settle) are
// pipelines of one-slot calls spread over masters.
func TestClusterScriptsTouchOneSlot(t *testing.T) {
	env := startClusterEnv(t)
	for _, s := range clusterScenarios {
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			s.run(t, env.scope(s.name))
			t.Logf("ran in %s", time.Since(start).Round(time.Millisecond))
		})
	}
	if t.Failed() {
		return
	}
	v := env.audit.checkOneSlot(t, "")
	t.Logf("%d script calls (%d at the masters), %d pipelines: %s", len(v.calls), len(v.routed), len(v.pipelines), v.summary())

	seen := map[string]bool{}
	for _, c := range v.calls {
		seen[c.Script] = true
		if c.Mode != "" {
			seen[c.Script+"/"+c.Mode] = true
		}
	}
	var want []string
	for _, s := range slices.Concat(record.Scripts(), tradescript.All(), presencescript.All()) {
		if s.Name() != presencescript.NameList { // the operator CLI's, not a server's
			want = append(want, s.Name())
		}
	}
	want = append(want, "save/save", "save/release", "save/settle")
	for _, name := range want {
		if !seen[name] {
			t.Errorf("script %s never ran in the scenarios: its slots are unchecked", name)
		}
	}

	// Multi-key steps: pipelines whose calls span slots.
	spread := 0
	for _, p := range v.pipelines {
		slots := map[int]bool{}
		for _, c := range p {
			slots[c.Slots[0]] = true
		}
		if len(slots) > 1 {
			spread++
		}
	}
	if spread == 0 {
		t.Error("no pipeline spanned two slots: the trade steps were not exercised across masters")
	}
	t.Logf("%d of %d pipelines spanned several slots, each call within one", spread, len(v.pipelines))

	// Where the keys went, for the README's table.
	masters := map[string]map[int]bool{}
	for _, c := range v.routed {
		kind := c.Script
		if strings.HasPrefix(kind, "presence-") {
			kind = "presence shards"
		}
		if masters[kind] == nil {
			masters[kind] = map[int]bool{}
		}
		masters[kind][slices.Index(env.rc.Addrs, c.Master)] = true
	}
	for _, kind := range slices.Sorted(maps.Keys(masters)) {
		t.Logf("%-16s on masters %v", kind, slices.Sorted(maps.Keys(masters[kind])))
	}
	t.Logf("other commands the masters received (single-key by their syntax, none redirected): %v", v.others)
}
