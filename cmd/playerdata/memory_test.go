package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/testsupport"
)

// playerdata presence reports Redis's eviction policy and memory headroom,
// as the Nodes read them: a policy that may evict records in red with what
// it does, a volatile one with its caveat, noeviction plainly, and the
// headroom only under a maxmemory limit. CI fails when this skips.
func TestPresenceReportsTheEvictionPolicy(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	if r.Kind == testsupport.KindMiniredis {
		t.Skip("needs a real redis-server: miniredis has no maxmemory-policy")
	}
	admin := r.Client(t)
	ctx := context.Background()
	url := "redis://" + r.Addr
	// A server that beat once: the namespace is one the CLI finds.
	if err := admin.HSet(ctx, presencecore.KeyFor(r.Namespace), "server-a", time.Now().UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		policy, maxmemory, evicts, says string
		headroom                        bool
	}{
		{"noeviction", "0", "nothing", "no maxmemory limit", false},
		{"allkeys-lru", "64mb", "records", "it may evict records", true},
		{"volatile-ttl", "64mb", "keys with a TTL", "it evicts keys with a TTL", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			if err := admin.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
				t.Fatal(err)
			}
			if err := admin.ConfigSet(ctx, "maxmemory", tc.maxmemory).Err(); err != nil {
				t.Fatal(err)
			}
			res := runArgs(t, 10*time.Second, "presence", "--json", "--redis", url, "--namespace", r.Namespace)
			if res.err != nil {
				t.Fatal(res.err)
			}
			var rep presenceReport
			if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, res.stdout)
			}
			m := rep.Memory
			if m == nil || m.Policy != tc.policy || m.Evicts != tc.evicts || m.UsedBytes <= 0 {
				t.Fatalf("redis_memory %+v, want policy %s evicting %s with memory used", m, tc.policy, tc.evicts)
			}
			if tc.headroom != (m.HeadroomBytes != nil) || (m.HeadroomBytes != nil && (*m.HeadroomBytes <= 0 ||
				*m.HeadroomBytes != m.LimitBytes-m.UsedBytes || m.LimitBytes != 64<<20)) {
				t.Fatalf("redis_memory %+v: headroom shown %t, want %t and limit - used of a 64 MiB limit",
					m, m.HeadroomBytes != nil, tc.headroom)
			}
			res = runArgs(t, 10*time.Second, "presence", "--redis", url, "--namespace", r.Namespace)
			if res.err != nil {
				t.Fatal(res.err)
			}
			for _, want := range []string{"maxmemory-policy " + tc.policy, tc.says} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("presence output has no %q:\n%s", want, res.stdout)
				}
			}
		})
	}
}
