package sameredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/sameredis"
	"github.com/ckernel/playerdata/testsupport"
)

// Prove passes for two clients of one server and DB, and fails, naming the
// probe and what was found, for another server or another DB of the same
// one; it leaves no probe behind.
func TestProve(t *testing.T) {
	r1, r2 := testsupport.StartRedis(t), testsupport.StartOwnRedis(t)
	ctx := context.Background()
	keys := []string{presencecore.ShardKey(r1.Namespace+":CKPresence", 0), presencecore.ShardKey(r1.Namespace+":CKPresence", 1)}
	a := r1.Client(t)
	if err := sameredis.Prove(ctx, r1.Client(t), a, keys); err != nil {
		t.Fatalf("Prove over one server and DB: %v", err)
	}
	if n, _ := a.Keys(ctx, r1.Namespace+"*probe*").Result(); len(n) != 0 {
		t.Errorf("probes left behind: %v", n)
	}
	for name, other := range map[string]redis.UniversalClient{
		"another server": r2.Client(t),
		"DB 1":           r1.Client(t, func(o *redis.Options) { o.DB = 1 }),
	} {
		var me *sameredis.MismatchError
		if err := sameredis.Prove(ctx, other, a, keys); !errors.As(err, &me) || me.Got != "" || me.Key == "" {
			t.Errorf("Prove with %s = %v, want a *MismatchError", name, err)
		}
	}
}

// A probe key lives in the slot of the key it probes, on a Redis Cluster,
// for a key with a hash tag and for one without.
func TestClusterProbeKeysShareTheirKeysSlot(t *testing.T) {
	c := testsupport.StartRedisCluster(t)
	rdb := c.Client(t)
	ctx := context.Background()
	for _, k := range []string{c.Namespace + ":CKPresence", presencecore.ShardKey(c.Namespace+":CKPresence", 3), "plain"} {
		want, err := rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := rdb.ClusterKeySlot(ctx, sameredis.ProbeKey(k, "n0nce")).Val(); got != want {
			t.Errorf("probe of %s in slot %d, the key in %d", k, got, want)
		}
	}
	if err := sameredis.Prove(ctx, c.Client(t), rdb, []string{c.Namespace + ":CKPresence",
		presencecore.ShardKey(c.Namespace+":CKPresence", 1), presencecore.ShardKey(c.Namespace+":CKPresence", 2)}); err != nil {
		t.Fatalf("Prove over two clients of one cluster: %v", err)
	}
}
