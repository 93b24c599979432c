package datadriver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/ckernel/playerdata/testsupport"
)

// A Redis that may evict the library's records is refused at start (an
// evicted record reads as a new profile: its player's next Join would get
// Defaults), unless the operator accepts it; a policy that evicts only keys
// with a TTL is allowed, with a warning; noeviction is quiet.
func TestNewNodeRefusesAnEvictingRedis(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	if r.Kind == testsupport.KindMiniredis {
		t.Skip("needs a real redis-server: miniredis has no maxmemory-policy")
	}
	admin := r.Client(t)
	ctx := context.Background()
	for i, tc := range []struct {
		policy  string
		accept  bool
		refused bool
		warns   bool
	}{
		{"noeviction", false, false, false},
		{"allkeys-lru", false, true, false},
		{"allkeys-random", false, true, false},
		{"allkeys-lru", true, false, true},
		{"volatile-lru", false, false, true},
	} {
		t.Run(fmt.Sprintf("%s accept %t", tc.policy, tc.accept), func(t *testing.T) {
			if err := admin.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err(); err != nil {
				t.Fatal(err)
			}
			logs := &testsupport.LogBuffer{}
			n, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: fmt.Sprintf("server-%d", i), Redis: r.Client(t),
				Namespace: r.Namespace, AcceptEviction: tc.accept, Logger: logs.Logger(slog.LevelInfo)})
			if err == nil {
				defer n.Close(ctx)
			}
			if got := errors.Is(err, datadriver.ErrEvictionPolicy); got != tc.refused {
				t.Fatalf("NewNode = %v; want refused %t", err, tc.refused)
			}
			if got := containsAll(logs.String(), "maxmemory-policy"); got != tc.warns {
				t.Errorf("a warning about the policy: %t, want %t\n%s", got, tc.warns, logs.String())
			}
		})
	}
}

// The policy is read again at run time: a CONFIG SET to allkeys-* after
// the start makes Healthy answer ErrEvictionPolicy within a minute.
func TestEvictionPolicySetAtRunTime(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	if r.Kind == testsupport.KindMiniredis {
		t.Skip("needs a real redis-server: miniredis has no maxmemory-policy")
	}
	admin := r.Client(t)
	ctx := context.Background()
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	mock := mockclock.New()
	// Handoff off: a mock clock moved by minutes would lapse the presence
	// lease, which Healthy would report first.
	s := newServer(t, r, "server-a", func(c *datadriver.NodeConfig) { c.Clock, c.DisableHandoff = mock, true })
	if err := s.node.Healthy(); err != nil {
		t.Fatalf("Healthy at start: %v", err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !errors.Is(s.node.Healthy(), datadriver.ErrEvictionPolicy) {
		if time.Now().After(deadline) {
			t.Fatalf("Healthy = %v a minute (virtual) after CONFIG SET allkeys-lru, want ErrEvictionPolicy", s.node.Healthy())
		}
		mock.Add(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	if !containsAll(s.logs.String(), "may evict the library's records") {
		t.Error("the change was not logged")
	}
}
