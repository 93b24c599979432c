package record_test

import (
	"context"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// A claim names one (driver, profile key) for the window after the send
// that made it: the same target again is SameTarget (whatever the body),
// another is ClaimedByOther naming the first; a retry never extends it; a
// key that is not a claim is ClaimCorrupt and left as it is.
func TestClaimOfAnIdempotencyKey(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	const window = time.Hour
	claim := func(driver, key, body string) record.ClaimResult {
		t.Helper()
		res, err := record.Claim(ctx, rdb, r.Namespace, "order-1", record.ClaimArgs{Driver: driver, Key: key,
			Digest: record.BodyDigest([]byte(body)), Window: window})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := claim("PlayerData", "user:1", "gift"); res.Outcome != record.Claimed {
		t.Fatalf("the first claim = %+v, want Claimed", res)
	}
	time.Sleep(100 * time.Millisecond)
	for _, body := range []string{"gift", "another gift"} {
		if res := claim("PlayerData", "user:1", body); res.Outcome != record.SameTarget {
			t.Fatalf("the same target with body %q = %+v, want SameTarget", body, res)
		}
	}
	ck := record.ClaimKey(r.Namespace, "order-1")
	if ttl, err := rdb.PTTL(ctx, ck).Result(); err != nil || ttl > window-90*time.Millisecond || ttl <= 0 {
		t.Fatalf("the claim's TTL after its retries = %v (%v), want the window less the 100 ms since it was made", ttl, err)
	}
	want := record.ClaimResult{Outcome: record.ClaimedByOther, Driver: "PlayerData", Key: "user:1",
		Digest: record.BodyDigest([]byte("gift"))}
	for _, other := range [][2]string{{"PlayerData", "user:2"}, {"Mailbox", "user:1"}} {
		if res := claim(other[0], other[1], "gift"); res != want {
			t.Fatalf("%s of %s = %+v, want %+v", other[1], other[0], res, want)
		}
	}
	rdb.Set(ctx, ck, "x", 0)
	if res := claim("PlayerData", "user:1", "gift"); res.Outcome != record.ClaimCorrupt {
		t.Fatalf("over a string = %+v, want ClaimCorrupt", res)
	}
	if v, _ := rdb.Get(ctx, ck).Result(); v != "x" {
		t.Fatalf("the string became %q", v)
	}
}
