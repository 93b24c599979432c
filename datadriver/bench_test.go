package datadriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// The benchmarks run each operation beside a baseline that makes the same
// number of Redis round trips with plain go-redis commands and no logic, on
// the same Redis in the same run. Each pair runs three ways: the operation
// alone and the baseline alone (ns/op and allocs/op), and interleaved, one
// of each per iteration, which reports both latencies and their ratio
// (baseline time / operation time = the operation's throughput relative to
// the baseline's) with machine noise falling on both alike.
//
//	go test -run '^$' -bench Ops -benchmem ./datadriver/

func benchPlayer() player {
	return player{Coins: 1234, Name: "bench", Items: map[string]int{"sword": 1, "shield": 2, "potion": 12}}
}

// benchOp is one operation and its baseline; setup (untimed) runs before
// each call of either.
type benchOp struct {
	name       string
	setup      func(i int) error
	op, base   func(i int) error
	roundTrips int // of each of op and base (checked by TestOneRoundTripPerOperation)
}

func BenchmarkOps(b *testing.B) {
	r := testsupport.StartRedis(b)
	s := newServer(b, r, "bench-a")
	d := players(b, s, func(c *datadriver.Config[player]) { c.Defaults = benchPlayer() })
	ctx := context.Background()
	raw, _ := msgpack.Marshal(benchPlayer())
	plain := r.Client(b)
	k := func(name string) string { return r.Namespace + ":base:" + name }

	saved, err := d.Join(ctx, "save")
	if err != nil {
		b.Fatal(err)
	}
	var rel *datadriver.Profile[player]
	run := 0
	ops := []benchOp{
		{
			name: "acquire", roundTrips: 1,
			op: func(i int) error {
				_, err := d.Load(ctx, fmt.Sprintf("acq-%d-%d", run, i), datadriver.LoadOptions{})
				return err
			},
			base: func(i int) error { return plain.HGetAll(ctx, k(fmt.Sprint("acq-", i))).Err() },
		},
		{
			name: "save", roundTrips: 1,
			op: func(int) error {
				_ = saved.Update(func(d *player) { d.Coins++ })
				return saved.Save(ctx)
			},
			base: func(i int) error { return plain.HSet(ctx, k("save"), "data", raw, "ver", i).Err() },
		},
		{
			name: "save-and-release", roundTrips: 1,
			setup: func(int) (err error) {
				if rel, err = d.Join(ctx, "rel"); err == nil {
					err = rel.Update(func(d *player) { d.Coins++ })
				}
				return err
			},
			op:   func(int) error { return rel.Release(ctx) },
			base: func(i int) error { return plain.HSet(ctx, k("rel"), "data", raw, "ver", i, "lock", "").Err() },
		},
		{
			name: "session", roundTrips: 3, // acquire, one save, save-and-release
			op: func(int) error {
				q, err := d.Join(ctx, "cycle")
				if err != nil {
					return err
				}
				_ = q.Update(func(d *player) { d.Coins++ })
				if err := q.Save(ctx); err != nil {
					return err
				}
				_ = q.Update(func(d *player) { d.Coins++ })
				return q.Release(ctx)
			},
			base: func(i int) error {
				if err := plain.HGetAll(ctx, k("cycle")).Err(); err != nil {
					return err
				}
				if err := plain.HSet(ctx, k("cycle"), "data", raw, "ver", i).Err(); err != nil {
					return err
				}
				return plain.HSet(ctx, k("cycle"), "data", raw, "ver", i, "lock", "").Err()
			},
		},
	}
	for _, o := range ops {
		timed := func(b *testing.B, f func(int) error) {
			b.ReportAllocs()
			run++
			for i := 0; b.Loop(); i++ {
				if o.setup != nil {
					b.StopTimer()
					if err := o.setup(i); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := f(i); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(o.name, func(b *testing.B) { timed(b, o.op) })
		b.Run(o.name+"/baseline", func(b *testing.B) { timed(b, o.base) })
		b.Run(o.name+"/paired", func(b *testing.B) {
			run++
			var opT, baseT time.Duration
			n := 0
			for i := 0; b.Loop(); i++ {
				if o.setup != nil {
					if err := o.setup(i); err != nil {
						b.Fatal(err)
					}
				}
				t0 := time.Now()
				if err := o.op(i); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := o.base(i); err != nil {
					b.Fatal(err)
				}
				opT, baseT = opT+t1.Sub(t0), baseT+time.Since(t1)
				n++
			}
			b.ReportMetric(float64(opT.Microseconds())/float64(n), "op-µs")
			b.ReportMetric(float64(baseT.Microseconds())/float64(n), "baseline-µs")
			b.ReportMetric(float64(baseT)/float64(opT), "vs-baseline")
		})
	}
}

// BenchmarkTrade measures a trade of two profiles on real Redis: 3 round
// trips (marks + journal, commit, settles), beside a baseline of the same
// round trips and commands with plain HSETs.
//
//	go test -run '^$' -bench Trade -benchmem ./datadriver/
func BenchmarkTrade(b *testing.B) {
	r := testsupport.StartRedis(b)
	s := newServer(b, r, "bench-t")
	d := players(b, s)
	ctx := context.Background()
	pa, err := d.Join(ctx, "trader-a")
	if err != nil {
		b.Fatal(err)
	}
	pb, err := d.Join(ctx, "trader-b")
	if err != nil {
		b.Fatal(err)
	}
	_ = pa.Update(func(d *player) { d.Items = map[string]int{"sword": 1} })
	_ = pa.Save(ctx)
	move := func(from, to *datadriver.Profile[player]) func(tx *datadriver.Tx) error {
		return func(tx *datadriver.Tx) error {
			f, t := datadriver.TradeData(tx, from), datadriver.TradeData(tx, to)
			f.Items["sword"]--
			t.Items["sword"]++
			return nil
		}
	}
	raw, _ := msgpack.Marshal(benchPlayer())
	plain := r.Client(b)
	k := func(s string) string { return r.Namespace + ":base:" + s }
	trade := func(i int) error {
		if i%2 == 0 {
			return datadriver.Trade(ctx, move(pa, pb), pa, pb)
		}
		return datadriver.Trade(ctx, move(pb, pa), pa, pb)
	}
	base := func(i int) error {
		if _, err := plain.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, k("a"), "trade", i)
			p.HSet(ctx, k("b"), "trade", i)
			p.HSet(ctx, k("j"), "img0", raw, "img1", raw)
			return nil
		}); err != nil {
			return err
		}
		if err := plain.HSet(ctx, k("j"), "state", "C").Err(); err != nil {
			return err
		}
		_, err := plain.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, k("a"), "data", raw)
			p.HSet(ctx, k("b"), "data", raw)
			return nil
		})
		return err
	}
	b.Run("trade", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := trade(i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("trade/paired", func(b *testing.B) {
		var opT, baseT time.Duration
		n := 0
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			if err := trade(i + 1); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := base(i); err != nil {
				b.Fatal(err)
			}
			opT, baseT = opT+t1.Sub(t0), baseT+time.Since(t1)
			n++
		}
		b.ReportMetric(float64(opT.Microseconds())/float64(n), "op-µs")
		b.ReportMetric(float64(baseT.Microseconds())/float64(n), "baseline-µs")
		b.ReportMetric(float64(baseT)/float64(opT), "vs-baseline")
		b.ReportMetric(float64(n)/opT.Seconds(), "trades/s")
	})
}
