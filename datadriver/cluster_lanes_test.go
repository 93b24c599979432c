package datadriver_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// moveSlot moves hash slot slot of rc from master from to master to, its
// keys and all, the way redis-cli --cluster reshard does: IMPORTING on the
// target, MIGRATING on the source, MIGRATE of the keys, then the slot
// assigned to the target on every master.
func moveSlot(t *testing.T, rc *testsupport.RedisCluster, slot, from, to int) {
	t.Helper()
	ctx := ctxT(t)
	src, dst := rc.Node(from).Client(t), rc.Node(to).Client(t)
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("moving slot %d: %v", slot, err)
		}
	}
	must(dst.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err())
	must(src.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, 1000).Result()
	must(err)
	if len(keys) > 0 {
		host, port, err := net.SplitHostPort(rc.Addrs[to])
		must(err)
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err())
	}
	// The target first, then the source, then the others (as redis-cli
	// does: so the source never redirects to a target that still imports).
	order := []int{to, from}
	for i := range rc.Addrs {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		must(rc.Node(i).Client(t).Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
	}
}

// A slot that moved to another master after the Node's cluster client
// last read the slots: the Node's calls for it go in the old master's lane
// (pipelined, SoloCalls 1), are redirected by the client (MOVED), and
// every session's progress lands; the record is on its new master.
func TestClusterSlotMovedUnderLanes(t *testing.T) {
	env := startClusterEnv(t)
	sc := env.scope("resharded")
	a := sc.server(t, "server-a", func(c *datadriver.NodeConfig) { c.SoloCalls = 1 })
	d := players(t, a)
	ctx := ctxT(t)
	p, err := d.Join(ctx, "p0") // the record exists before its slot moves
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	key := sc.recordKey("p0")
	from := slices.Index(sc.rc.Addrs, sc.rc.MasterOf(key))
	to := (from + 1) % len(sc.rc.Addrs)
	moveSlot(t, sc.rc, testsupport.KeySlot(key), from, to)
	if n, err := sc.rc.Node(to).Client(t).Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("p0's record on its new master: EXISTS %d, %v", n, err)
	}

	sessions(t, d, 16, 10)

	moved := 0
	for _, r := range env.audit.of(sc.ns).redirects {
		if strings.HasPrefix(r, "evalsha at ") && strings.Contains(r, "MOVED") {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("no script call was redirected: the test tests nothing (redirects: %v)", env.audit.of(sc.ns).redirects)
	}
	t.Logf("%d script calls redirected (%v); every session's coins there", moved, env.audit.of(sc.ns).redirects)
	if n, err := sc.rc.Node(to).Client(t).Exists(context.Background(), key).Result(); err != nil || n != 1 {
		t.Fatalf("p0's record after the sessions: EXISTS on its new master %d, %v", n, err)
	}
}

// A master paused for real (SIGSTOP: a call to it is written and never
// answered) holds no call to another master: with one solo call per
// master, a save on another master lands while the paused master's save
// hangs, and the hung one lands once the master resumes.
func TestClusterPausedMasterHoldsNoOtherLane(t *testing.T) {
	env := startClusterEnv(t)
	sc := env.scope("paused")
	a := sc.server(t, "server-a", func(c *datadriver.NodeConfig) {
		c.SoloCalls = 1
		c.SaveTimeout = 30 * time.Second
		// The default presence timings: the pause must not fence the Node
		// if its beats go to the paused master.
		c.Beat, c.PresenceTTL, c.FenceMargin = 0, 0, 0
	})
	d := players(t, a)
	ctx := ctxT(t)
	hung, other := sc.profilesOnDifferentMasters("PlayerData", "p")
	profiles := map[string]*datadriver.Profile[player]{}
	for _, k := range []string{hung, other} {
		p, err := d.Join(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *player) { d.Coins = 9 })
		profiles[k] = p
	}
	hungKey := sc.recordKey(hung)
	_, arrived := holdScriptCalls(a.faults, hungKey, false) // the master itself holds them
	paused := slices.Index(sc.rc.Addrs, sc.rc.MasterOf(hungKey))
	sc.rc.PauseMaster(t, paused)
	hungDone := make(chan error, 1)
	go func() { hungDone <- profiles[hung].Save(ctx) }()
	<-arrived
	if err := profiles[other].Save(ctx); err != nil {
		t.Fatalf("save on another master while %s is paused: %v", sc.rc.Addrs[paused], err)
	}
	select {
	case err := <-hungDone:
		t.Fatalf("the save on the paused master ended (%v) while it was paused: the test tests nothing", err)
	default:
	}
	sc.rc.ResumeMaster(t, paused)
	if err := <-hungDone; err != nil {
		t.Fatalf("save on the resumed master: %v", err)
	}
	a.faults.Clear()
	for _, k := range []string{hung, other} {
		if c := clusterStored[player](t, sc, k).Coins; c != 9 {
			t.Fatalf("%s stored %d coins, want 9", k, c)
		}
	}
}
