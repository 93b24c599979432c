package datadriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkKeyedSend measures what an IdempotencyKey adds to a Send (its
// namespace-wide claim: one more round trip) on real redis-server: an
// unkeyed and a keyed Send, each to a profile of its own (offline), alone
// and interleaved one of each per iteration in the same run, which reports
// both latencies and their difference with machine noise falling on both,
// and the claim's round trip alone (the rest of the difference is the key's
// bookkeeping inside send.lua, which keyed sends paid before claims).
//
//	go test -run '^$' -bench KeyedSend -benchmem ./datadriver/
func BenchmarkKeyedSend(b *testing.B) {
	r := testsupport.StartRedis(b)
	d := giftDriver(b, newServer(b, r, "bench-a"))
	rdb := r.Client(b)
	ctx := context.Background()
	run := 0
	send := func(keyed bool, i int) error {
		key := fmt.Sprintf("send-%d-%v-%d", run, keyed, i)
		var opts datadriver.SendOptions
		if keyed {
			opts.IdempotencyKey = "order-" + key
		}
		_, err := d.Send(ctx, key, gift{Coins: 1}, opts)
		return err
	}
	for _, keyed := range []bool{false, true} {
		b.Run(map[bool]string{false: "unkeyed", true: "keyed"}[keyed], func(b *testing.B) {
			b.ReportAllocs()
			run++
			for i := 0; b.Loop(); i++ {
				if err := send(keyed, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("paired", func(b *testing.B) {
		run++
		var plain, keyed, claim time.Duration
		n := 0
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			if err := send(false, i); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := send(true, i); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if _, err := record.Claim(ctx, rdb, r.Namespace, fmt.Sprintf("alone-%d-%d", run, i), record.ClaimArgs{
				Driver: "PlayerData", Key: "user:1", Digest: "d", Window: time.Hour}); err != nil {
				b.Fatal(err)
			}
			plain, keyed, claim = plain+t1.Sub(t0), keyed+t2.Sub(t1), claim+time.Since(t2)
			n++
		}
		b.ReportMetric(float64(plain.Microseconds())/float64(n), "unkeyed-µs")
		b.ReportMetric(float64(keyed.Microseconds())/float64(n), "keyed-µs")
		b.ReportMetric(float64((keyed-plain).Microseconds())/float64(n), "added-µs")
		b.ReportMetric(float64(claim.Microseconds())/float64(n), "claim-µs")
	})
}
