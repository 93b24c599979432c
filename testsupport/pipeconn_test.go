package testsupport_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/testsupport"
)

// TestClusterClientLargePipeline: a pipeline far larger than what miniredis
// reads at once (three 16 KiB values, as a trade's first pipeline after a
// Redis restart carries whole script sources and data images) completes
// at once on virtual time, as over a real socket, instead of stalling until
// its deadline.
func TestClusterClientLargePipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testsupport.NewCluster(t)
		rdb := c.Client(t)
		t.Cleanup(func() { _ = rdb.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		big := strings.Repeat("x", 16<<10)
		start := time.Now()
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range []string{"a", "b", "c"} {
				p.Set(ctx, k, big, 0)
			}
			p.Get(ctx, "c")
			return nil
		})
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		if took := time.Since(start); took > 0 {
			t.Errorf("the pipeline took %v of virtual time, want none", took)
		}
		if got := cmds[3].(*redis.StringCmd).Val(); got != big {
			t.Errorf("GET c gave %d bytes, want %d", len(got), len(big))
		}
	})
}
