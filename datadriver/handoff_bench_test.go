package datadriver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkHandoffStaleConnection measures a stale-connection handoff on real
// Redis and NATS over loopback: the key is live on one server and the other
// joins it, so every Join asks the holder, which ends its session, saves,
// releases and replies. The latency is from the Join call to holding the
// profile; p50 and p99 are reported beside ns/op.
//
//	go test -run '^$' -bench HandoffStaleConnection -benchtime 2000x ./datadriver/
func BenchmarkHandoffStaleConnection(b *testing.B) {
	r, n := testsupport.StartRedis(b), testsupport.StartNATS(b)
	servers := []*server{
		newServer(b, r, "bench-a", withNATS(b, n)),
		newServer(b, r, "bench-b", withNATS(b, n)),
	}
	drivers := []*datadriver.Driver[player]{players(b, servers[0]), players(b, servers[1])}
	ctx := context.Background()
	if _, err := drivers[0].Join(ctx, "hot"); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for i := 1; b.Loop(); i++ {
		start := time.Now()
		p, err := drivers[i%2].Join(ctx, "hot")
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		_ = p.Update(func(d *player) { d.Coins++ })
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
