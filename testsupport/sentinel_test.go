package testsupport

import (
	"context"
	"testing"
	"time"
)

// TestSentinelPromotion: a write acknowledged by WAIT on the primary is
// read back through the failover client after KillPrimary, from the
// promoted replica, and the client writes to it; with two replicas the one
// left follows the new primary, so WAIT 1 is met again. With one sentinel
// and with three (quorum two).
func TestSentinelPromotion(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SentinelConfig
	}{
		{"one-sentinel", SentinelConfig{Replicas: 2}},
		{"three-sentinels", SentinelConfig{Replicas: 2, Sentinels: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) { testSentinelPromotion(t, tc.cfg) })
	}
}

func testSentinelPromotion(t *testing.T, cfg SentinelConfig) {
	s := StartSentinel(t, cfg)
	rdb := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	conn := rdb.Conn() // WAIT counts its own connection's writes
	if err := conn.Set(ctx, s.Key("k"), "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Wait(ctx, 2, 5*time.Second).Result(); err != nil || n < 2 {
		t.Fatalf("WAIT 2: %d, %v", n, err)
	}
	_ = conn.Close()

	old := s.Primary()
	killed := time.Now()
	promoted := s.KillPrimary(t)
	t.Logf("promoted %s %v after killing %s", promoted.Addr, time.Since(killed).Round(time.Millisecond), old.Addr)
	if promoted == old {
		t.Fatal("KillPrimary returned the dead primary")
	}

	// The client learns of the switch by itself; its first commands may
	// fail while it does.
	var got string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, err = rdb.Get(ctx, s.Key("k")).Result(); err == nil {
			break
		}
	}
	if err != nil || got != "before" {
		t.Fatalf("GET after the promotion: %q, %v; want the acknowledged write", got, err)
	}
	conn = rdb.Conn()
	defer conn.Close()
	if err := conn.Set(ctx, s.Key("k"), "after", 0).Err(); err != nil {
		t.Fatalf("SET on the promoted primary: %v", err)
	}
	n, err := conn.Wait(ctx, 1, 10*time.Second).Result()
	if err != nil || n < 1 {
		t.Fatalf("WAIT 1 on the promoted primary: %d, %v; the other replica should follow it", n, err)
	}
	if a := s.Primary().Addr; a != promoted.Addr {
		t.Errorf("Primary() = %s, want the promoted %s", a, promoted.Addr)
	}
}
