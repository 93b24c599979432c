package datadriver_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The helpers of the Redis Cluster tests (cluster_test.go): a Redis Cluster
// of three masters, one NATS, game servers whose Redis is a
// *redis.ClusterClient, and a slot audit that sees every script call those
// servers make.

// clusterTimings shortens the handoff timings, a little less than fast does:
// a 2-core machine runs three redis-servers and the test, and a beat that
// arrives late must not fence a live session off.
func clusterTimings(c *datadriver.NodeConfig) {
	c.Beat = 100 * time.Millisecond
	c.PresenceTTL = 800 * time.Millisecond
	c.FenceMargin = 200 * time.Millisecond
	c.RequestRepeat = 200 * time.Millisecond
	c.ParkMin = 20 * time.Millisecond
	c.ParkMax = 80 * time.Millisecond
}

// clusterPresenceShards splits the presence hash so that its shards ("{n}"
// hash tags) land on different masters.
const clusterPresenceShards = 4

// clusterEnv is a Redis Cluster, a NATS server and the slot audit of every
// server started on them. Scenarios share it, each under a namespace of its
// own (scope).
type clusterEnv struct {
	rc    *testsupport.RedisCluster
	nats  *testsupport.NATS
	audit *slotAudit
	admin *redis.ClusterClient // reads records for assertions; not audited
}

// startClusterEnv starts a Redis Cluster of three masters (about 2 s) and a
// NATS server. It skips the test when redis-server is missing or older
// than 7.0.
func startClusterEnv(t *testing.T) *clusterEnv {
	t.Helper()
	start := time.Now()
	rc := testsupport.StartRedisCluster(t)
	t.Logf("Redis Cluster %v up in %s", rc.Addrs, time.Since(start).Round(time.Millisecond))
	return &clusterEnv{rc: rc, nats: testsupport.StartNATS(t), audit: newSlotAudit(rc), admin: rc.Client(t)}
}

// clusterScope is one scenario's namespace on a clusterEnv.
type clusterScope struct {
	*clusterEnv
	ns string
}

// scope returns a fresh namespace of the env for the scenario name (letters
// only: it is also a NATS subject token).
func (e *clusterEnv) scope(name string) *clusterScope {
	return &clusterScope{clusterEnv: e, ns: e.rc.Namespace + name}
}

// sub returns a namespace under the scope's, for a subtest.
func (sc *clusterScope) sub(name string) *clusterScope {
	return &clusterScope{clusterEnv: sc.clusterEnv, ns: sc.ns + name}
}

// server starts a Node named job under the scope's namespace, on its own
// cluster client (watched by the audit, then by its fault hook) and its own
// NATS connection, with clusterTimings and sharded presence; opts apply
// after those. It is closed at cleanup.
func (sc *clusterScope) server(tb testing.TB, job string, opts ...func(*datadriver.NodeConfig)) *server {
	tb.Helper()
	return sc.serverWith(tb, job, nil, opts...)
}

// serverWith is server with hooks added to the client between the audit's
// and the fault hook, before the Node's first command.
func (sc *clusterScope) serverWith(tb testing.TB, job string, hooks []redis.Hook, opts ...func(*datadriver.NodeConfig)) *server {
	tb.Helper()
	rdb := sc.rc.Client(tb)
	sc.audit.watch(rdb)
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	s := &server{rdb: rdb, faults: &testsupport.FaultHook{}, logs: &testsupport.LogBuffer{}}
	rdb.AddHook(s.faults)
	prdb := sc.rc.Client(tb) // beats apart, with the same hooks
	sc.audit.watch(prdb)
	for _, h := range hooks {
		prdb.AddHook(h)
	}
	prdb.AddHook(s.faults)
	cfg := datadriver.NodeConfig{
		JobID:          job,
		Redis:          rdb,
		PresenceRedis:  prdb,
		NATS:           sc.nats.Connect(tb),
		Namespace:      sc.ns,
		PresenceShards: clusterPresenceShards,
		Logger:         slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	clusterTimings(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	n, err := datadriver.NewNode(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("NewNode %s on the Redis Cluster: %v", job, err)
	}
	s.node = n
	tb.Cleanup(func() {
		s.faults.Clear()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return s
}

// recordKey is the Redis key of a PlayerData profile of the scope.
func (sc *clusterScope) recordKey(key string) string {
	return record.Key(sc.ns, "PlayerData", key)
}

// record reads the fields of a PlayerData record.
func (sc *clusterScope) record(tb testing.TB, key string) map[string]string {
	tb.Helper()
	m, err := sc.admin.HGetAll(context.Background(), sc.recordKey(key)).Result()
	if err != nil {
		tb.Fatalf("HGETALL %s: %v", sc.recordKey(key), err)
	}
	return m
}

// stored decodes the data of a PlayerData record into a T.
func clusterStored[T any](tb testing.TB, sc *clusterScope, key string) T {
	tb.Helper()
	var v T
	if raw := sc.record(tb, key)["data"]; raw != "" {
		if err := msgpack.Unmarshal([]byte(raw), &v); err != nil {
			tb.Fatalf("decode %s: %v", key, err)
		}
	}
	return v
}

// inboxLen is the number of messages waiting for a PlayerData profile.
func (sc *clusterScope) inboxLen(tb testing.TB, key string) int64 {
	tb.Helper()
	n, err := sc.admin.XLen(context.Background(), record.InboxKey(sc.recordKey(key))).Result()
	if err != nil {
		tb.Fatalf("XLEN: %v", err)
	}
	return n
}

// masterOf is the index (0, 1, 2) of the master serving key.
func (sc *clusterScope) masterOf(key string) int {
	return slices.Index(sc.rc.Addrs, sc.rc.MasterOf(key))
}

// profilesOnDifferentMasters returns two profile keys of driver whose
// records live on different masters. RedisCluster.KeysOnDifferentMasters
// answers raw Redis keys ("{x0}"); a profile key is wrapped in the record's
// own hash tag ("<ns>:{<driver>:<key>}"), so the search is over that.
func (sc *clusterScope) profilesOnDifferentMasters(driver, prefix string) (a, b string) {
	a = prefix + "0"
	ma := sc.rc.MasterOf(record.Key(sc.ns, driver, a))
	for n := 1; ; n++ {
		b = prefix + fmt.Sprint(n)
		if sc.rc.MasterOf(record.Key(sc.ns, driver, b)) != ma {
			return a, b
		}
	}
}

// jobOnTaggedShard returns a JobID starting with prefix whose presence shard
// is a tagged one ("<key>:{n}", not shard 0) served by another master than
// key's, and that shard's key.
func (sc *clusterScope) jobOnTaggedShard(prefix, key string) (job, shard string) {
	for i := 0; ; i++ {
		job = prefix + fmt.Sprint(i)
		n := presencecore.ShardOf(job, clusterPresenceShards)
		shard = presencecore.ShardKey(sc.ns+":"+presencecore.DefaultKeyName, n)
		if n != 0 && sc.masterOf(shard) != sc.masterOf(key) {
			return job, shard
		}
	}
}

// scriptCall is one call of one of the project's scripts, as the audit saw it.
type scriptCall struct {
	Script string
	Mode   string // save.lua's mode (save, release, settle), else ""
	Keys   []string
	Slots  []int
	Master string // the master that received it ("" at the cluster client)
	Err    string // the error it answered, "" for none
}

func (c scriptCall) String() string {
	s := c.Script
	if c.Mode != "" {
		s += "/" + c.Mode
	}
	return fmt.Sprintf("%s keys %v slots %v", s, c.Keys, c.Slots)
}

// slotAudit records every script call of the clients it watches, twice: as
// the application made it (at the cluster client: single calls and whole
// pipelines) and as a master received it (at each node client). Safe for
// concurrent use.
type slotAudit struct {
	rc *testsupport.RedisCluster

	mu        sync.Mutex
	calls     []scriptCall   // at the cluster client
	pipelines [][]scriptCall // the script calls of each pipeline, at the cluster client
	routed    []scriptCall   // at the masters
	redirects []string       // MOVED, ASK, CROSSSLOT or non-local-key answers seen by a master
	others    map[string]int // other commands the masters received, by name
}

func newSlotAudit(rc *testsupport.RedisCluster) *slotAudit {
	return &slotAudit{rc: rc, others: map[string]int{}}
}

// watch adds the audit's hooks to rdb: one on the cluster client, one on
// every node client it makes (OnNewNode, before its first command).
func (a *slotAudit) watch(rdb *redis.ClusterClient) {
	rdb.AddHook(clusterAuditHook{a})
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(nodeAuditHook{a: a, addr: node.Options().Addr}) })
}

// identify reads a script call off cmd; false for other commands.
func identify(cmd redis.Cmder) (scriptCall, bool) {
	in, ok := testsupport.Identify(cmd)
	if !ok {
		return scriptCall{}, false
	}
	c := scriptCall{Script: in.Script, Keys: in.Keys}
	if in.Script == record.ScriptSave {
		if sa, err := record.ParseSaveArgs(in.Args); err == nil {
			c.Mode = string(sa.Mode)
		}
	}
	for _, k := range in.Keys {
		c.Slots = append(c.Slots, testsupport.KeySlot(k))
	}
	return c, true
}

// clusterAuditHook sees calls as the application makes them.
type clusterAuditHook struct{ a *slotAudit }

func (h clusterAuditHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h clusterAuditHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c, ok := identify(cmd); ok {
			h.a.mu.Lock()
			h.a.calls = append(h.a.calls, c)
			h.a.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h clusterAuditHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var p []scriptCall
		for _, cmd := range cmds {
			if c, ok := identify(cmd); ok {
				p = append(p, c)
			}
		}
		h.a.mu.Lock()
		h.a.calls = append(h.a.calls, p...)
		if len(p) > 0 {
			h.a.pipelines = append(h.a.pipelines, p)
		}
		h.a.mu.Unlock()
		return next(ctx, cmds)
	}
}

// nodeAuditHook sees calls as one master receives them, with its answers.
type nodeAuditHook struct {
	a    *slotAudit
	addr string
}

func (h nodeAuditHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h nodeAuditHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.record(cmd)
		return err
	}
}

func (h nodeAuditHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return err
	}
}

// isRedirect reports whether err is the answer to a command sent to a
// master that does not serve its keys, or to a script over keys of several
// slots (or touching a key it did not declare on another master).
func isRedirect(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, code := range []string{"MOVED ", "ASK ", "CROSSSLOT ", "TRYAGAIN ", "CLUSTERDOWN "} {
		if strings.HasPrefix(msg, code) {
			return true
		}
	}
	return strings.Contains(msg, "non local key")
}

func (h nodeAuditHook) record(cmd redis.Cmder) {
	var redirect string
	if err := cmd.Err(); isRedirect(err) {
		redirect = fmt.Sprintf("%s at %s: %v", cmd.Name(), h.addr, err)
	}
	c, ok := identify(cmd)
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	if redirect != "" {
		h.a.redirects = append(h.a.redirects, redirect)
	}
	if !ok {
		h.a.others[cmd.Name()]++
	}
	if ok {
		c.Master = h.addr
		if err := cmd.Err(); err != nil {
			c.Err = err.Error()
		}
		h.a.routed = append(h.a.routed, c)
	}
}

// auditView is a copy of what the audit saw of one namespace.
type auditView struct {
	calls     []scriptCall
	pipelines [][]scriptCall
	routed    []scriptCall
	redirects []string
	others    map[string]int
}

// of returns what the audit saw of namespace ns and the namespaces under it
// (calls whose first key starts with ns), or of everything when ns is "".
func (a *slotAudit) of(ns string) auditView {
	in := func(c scriptCall) bool { return ns == "" || len(c.Keys) > 0 && strings.HasPrefix(c.Keys[0], ns) }
	a.mu.Lock()
	defer a.mu.Unlock()
	var v auditView
	for _, c := range a.calls {
		if in(c) {
			v.calls = append(v.calls, c)
		}
	}
	for _, p := range a.pipelines {
		if in(p[0]) {
			v.pipelines = append(v.pipelines, slices.Clone(p))
		}
	}
	for _, c := range a.routed {
		if in(c) {
			v.routed = append(v.routed, c)
		}
	}
	v.redirects = slices.Clone(a.redirects)
	v.others = maps.Clone(a.others)
	return v
}

// checkOneSlot fails the test for any script call of ns (every namespace
// when ns is "") without keys or with keys of two slots, any call a master
// received whose keys it does not serve, and any redirect or cross-slot
// answer; it returns the view it checked.
func (a *slotAudit) checkOneSlot(t *testing.T, ns string) auditView {
	t.Helper()
	v := a.of(ns)
	if len(v.calls) == 0 {
		t.Fatalf("the audit saw no script call under %q", ns)
	}
	for _, c := range v.calls {
		switch {
		case len(c.Keys) == 0:
			t.Errorf("%s: a script with no KEYS goes to any master: it must name what it touches", c)
		case slices.ContainsFunc(c.Slots, func(s int) bool { return s != c.Slots[0] }):
			t.Errorf("%s: one script over two slots (CROSSSLOT on a Redis Cluster)", c)
		}
	}
	for _, c := range v.routed {
		if want := a.rc.MasterOf(c.Keys[0]); c.Master != want {
			t.Errorf("%s was sent to %s, but %s serves slot %d", c, c.Master, want, c.Slots[0])
		}
	}
	for _, r := range v.redirects {
		t.Errorf("a master answered a redirect or cross-slot error: %s", r)
	}
	return v
}

// summary counts calls by script (and save mode), for logs.
func (v auditView) summary() string {
	n := map[string]int{}
	for _, c := range v.calls {
		name := c.Script
		if c.Mode != "" {
			name += "/" + c.Mode
		}
		n[name]++
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s×%d", name, n[name]))
	}
	return strings.Join(parts, " ")
}
