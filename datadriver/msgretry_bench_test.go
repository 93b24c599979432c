package datadriver_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// BenchmarkRetriedGiftDelivery measures how long a retried gift takes to
// reach a live holder, on real Redis and NATS over loopback: server A holds
// a profile (autosave every 5 s), server B sends it a gift with an
// IdempotencyKey whose first Send stores the message and loses its answer
// (so it notifies nobody), and retries at once with the same key. Each
// gift starts after a pause drawn from [0, 5 s), so that the gifts fall
// anywhere between two autosaves. The latency runs from the retry's call to
// OnMessage running on A; p50, p99 and max are reported beside ns/op.
//
//	go test -run '^$' -bench RetriedGiftDelivery -benchtime 40x ./datadriver/
func BenchmarkRetriedGiftDelivery(b *testing.B) {
	r, n := testsupport.StartRedis(b), testsupport.StartNATS(b)
	a, s := newServer(b, r, "bench-a", withNATS(b, n)), newServer(b, r, "bench-b", withNATS(b, n))
	arrived := make(chan time.Time, 1)
	autosave := func(c *datadriver.Config[wallet]) { c.Autosave = 5 * time.Second }
	da := giftDriver(b, a, autosave, func(c *datadriver.Config[wallet]) {
		next := c.OnMessage
		c.OnMessage = func(w *wallet, m datadriver.Message) error {
			err := next(w, m)
			arrived <- time.Now()
			return err
		}
	})
	db := giftDriver(b, s, autosave)
	ctx := context.Background()
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		b.Fatal(err)
	}
	var lose atomic.Bool
	s.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if err == nil && isScript(cmd, record.ScriptSend) && lose.CompareAndSwap(true, false) {
			return testsupport.ErrInjected // the message is stored; its answer is lost
		}
		return err
	})
	lat := make([]time.Duration, 0, b.N)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; b.Loop(); i++ {
		time.Sleep(time.Duration(rng.Int64N(int64(5 * time.Second))))
		key := datadriver.SendOptions{IdempotencyKey: "order-" + time.Now().Format("150405.000000000")}
		lose.Store(true)
		if _, err := db.Send(ctx, "user:1", gift{Coins: 1}, key); err == nil {
			b.Fatal("a Send whose answer was lost reported success")
		}
		start := time.Now()
		if _, err := db.Send(ctx, "user:1", gift{Coins: 1}, key); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-arrived:
			lat = append(lat, at.Sub(start))
		case <-time.After(30 * time.Second):
			b.Fatalf("gift %d not applied within 30 s", i)
		}
		if i%50 == 49 {
			if err := p.Save(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}
