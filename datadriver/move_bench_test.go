package datadriver_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkMoveTo measures Profile.MoveTo between two servers on real
// Redis and NATS over loopback (logs discarded, as a game server's Debug
// level would be off): one profile moves back and forth, each move followed
// by the target's Join of the moved profile and an Update (ns/op counts the
// three). The latency p50 and p99 reported are MoveTo's alone, from its
// call to its return (the flip landed). For a CPU profile of the move path:
//
//	go test -run '^$' -bench MoveTo -benchtime 5000x -cpuprofile cpu.out ./datadriver/
func BenchmarkMoveTo(b *testing.B) {
	r, n := testsupport.StartRedis(b), testsupport.StartNATS(b)
	quiet := func(c *datadriver.NodeConfig) { c.Logger = slog.New(slog.DiscardHandler) }
	servers := []*server{
		newServer(b, r, "bench-a", withNATS(b, n), quiet),
		newServer(b, r, "bench-b", withNATS(b, n), quiet),
	}
	drivers := []*datadriver.Driver[player]{players(b, servers[0]), players(b, servers[1])}
	ctx := context.Background()
	p, err := drivers[0].Join(ctx, "moving")
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for i := 1; b.Loop(); i++ {
		to := servers[i%2]
		start := time.Now()
		if err := p.MoveTo(ctx, to.node.JobID()); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		for !drivers[i%2].MoveHeld("moving") {
			time.Sleep(20 * time.Microsecond)
		}
		if p, err = drivers[i%2].Join(ctx, "moving"); err != nil {
			b.Fatal(err)
		}
		if err := p.Update(func(d *player) { d.Coins++ }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
