package testsupport

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	c := StartRedisCluster(t)
	t.Logf("three-master cluster ready in %v", time.Since(start).Round(time.Millisecond))
	if len(c.Addrs) != clusterMasters {
		t.Fatalf("Addrs = %v, want %d masters", c.Addrs, clusterMasters)
	}
	if len(c.Namespace) != 17 || !strings.HasPrefix(c.Namespace, "t") {
		t.Errorf("namespace %q: want t + 16 hex digits", c.Namespace)
	}
	if want := c.Namespace + ":user:42"; c.Key("user", "42") != want {
		t.Errorf("Key = %q, want %q", c.Key("user", "42"), want)
	}
	cc := c.Client(t)
	var _ redis.UniversalClient = cc // what datadriver.NodeConfig.Redis takes

	t.Run("KeySlotMatchesCLUSTER_KEYSLOT", func(t *testing.T) {
		rdb := c.Node(0).Client(t)
		keys := []string{"", "a", "user:42", "{user:42}:lock", "x{}y", "{}{a}", "a{b}c{d}", "{a", "}{a}", c.Key("42")}
		for n := range 200 {
			keys = append(keys, c.Key("k", strconv.Itoa(n)))
		}
		for _, key := range keys {
			want, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
			}
			if got := KeySlot(key); got != int(want) {
				t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	})

	t.Run("RoutesKeyToItsMaster", func(t *testing.T) {
		seen := map[string]bool{}
		for n := range 30 {
			key := c.Key("route", strconv.Itoa(n))
			if err := cc.Set(ctx, key, n, 0).Err(); err != nil {
				t.Fatalf("SET %s through the cluster client: %v", key, err)
			}
			owner := c.MasterOf(key)
			seen[owner] = true
			routed, err := cc.MasterForKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if routed.Options().Addr != owner {
				t.Errorf("client routes %s to %s, MasterOf says %s", key, routed.Options().Addr, owner)
			}
			// The key is on its master and nowhere else: the others redirect.
			for i, addr := range c.Addrs {
				got, err := c.Node(i).Client(t).Get(ctx, key).Result()
				switch {
				case addr == owner && (err != nil || got != strconv.Itoa(n)):
					t.Errorf("GET %s on its master %s = %q, %v", key, addr, got, err)
				case addr != owner && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ")):
					t.Errorf("GET %s on %s (not its master) = %q, %v; want MOVED", key, addr, got, err)
				}
			}
		}
		if len(seen) != clusterMasters {
			t.Errorf("30 keys landed on %d masters, want all %d", len(seen), clusterMasters)
		}
	})

	t.Run("KeysOnDifferentMasters", func(t *testing.T) {
		a, b := c.KeysOnDifferentMasters(c.Key("p"))
		if c.MasterOf(a) == c.MasterOf(b) {
			t.Fatalf("%s and %s are both on %s", a, b, c.MasterOf(a))
		}
		for _, tag := range []string{a, b} {
			if c.MasterOf(tag+":lock") != c.MasterOf(tag) || KeySlot(tag+":lock") != KeySlot(tag) {
				t.Errorf("%s:lock is not in the slot of %s", tag, tag)
			}
		}
	})

	t.Run("EvalOnHashTag", func(t *testing.T) {
		tag, _ := c.KeysOnDifferentMasters(c.Key("eval"))
		script := `redis.call("SET", KEYS[1], ARGV[1]); redis.call("SET", KEYS[2], ARGV[1]); return redis.call("MGET", KEYS[1], KEYS[2])`
		got, err := cc.Eval(ctx, script, []string{tag + ":lock", tag + ":data"}, "v").StringSlice()
		if err != nil {
			t.Fatalf("EVAL on two keys of one hash tag: %v", err)
		}
		if len(got) != 2 || got[0] != "v" || got[1] != "v" {
			t.Fatalf("EVAL answered %q, want [v v]", got)
		}
	})

	t.Run("EvalAcrossSlotsFailsCROSSSLOT", func(t *testing.T) {
		a, b := c.KeysOnDifferentMasters(c.Key("cross"))
		script := `return redis.call("MGET", KEYS[1], KEYS[2])`
		err := cc.Eval(ctx, script, []string{a, b}).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Fatalf("EVAL on %s and %s (masters %s, %s) answered %v, want CROSSSLOT", a, b, c.MasterOf(a), c.MasterOf(b), err)
		}
	})
}
