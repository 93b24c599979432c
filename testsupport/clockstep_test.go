//go:build linux

package testsupport

import (
	"context"
	"testing"
	"time"
)

// TestSteppableRedisStepsTime: TIME, and TIME inside a Lua script, jump by
// each Step (forward 300 s, then back 330 s), and a key's TTL, which Redis
// counts on its wall clock too, follows.
func TestSteppableRedisStepsTime(t *testing.T) {
	r := StartRedisSteppable(t)
	rdb := r.Client(t)
	ctx := context.Background()

	skew := func() time.Duration {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(now)
	}
	luaSkew := func() time.Duration {
		t.Helper()
		v, err := rdb.Eval(ctx, "local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)", nil).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(time.UnixMilli(v))
	}
	near := func(what string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -2*time.Second || d > 2*time.Second {
			t.Errorf("%s: Redis clock is %v from the host's, want about %v", what, got, want)
		}
	}

	near("start", skew(), 0)
	if err := rdb.Set(ctx, r.Key("ttl"), "x", 200*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	r.Step(300 * time.Second)
	near("after +300 s: TIME", skew(), 300*time.Second)
	near("after +300 s: TIME in Lua", luaSkew(), 300*time.Second)
	if n, err := rdb.Exists(ctx, r.Key("ttl")).Result(); err != nil || n != 0 {
		t.Errorf("a key with 200 s to live still exists after a +300 s step (%d, %v)", n, err)
	}

	r.Step(-330 * time.Second)
	near("after -330 s: TIME", skew(), -30*time.Second)
	if got := r.Offset(); got != -30*time.Second {
		t.Errorf("Offset = %v, want -30s", got)
	}
}
