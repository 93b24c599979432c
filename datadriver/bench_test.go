package datadriver_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/vmihailenco/msgpack/v5"
)

// The benchmarks run each operation beside a baseline that makes the same
// number of Redis round trips with plain go-redis commands and no logic, on
// the same Redis in the same run, so the ratio says what the lock costs.
//
//	go test -run '^$' -bench . -benchmem ./datadriver/

func benchPlayer() player {
	return player{Coins: 1234, Name: "bench", Items: map[string]int{"sword": 1, "shield": 2, "potion": 12}}
}

func BenchmarkOps(b *testing.B) {
	r := testsupport.StartRedis(b)
	s := newServer(b, r, "bench-a")
	d := players(b, s, func(c *datadriver.Config[player]) { c.Defaults = benchPlayer() })
	ctx := context.Background()
	raw, _ := msgpack.Marshal(benchPlayer())
	plain := r.Client(b)

	b.Run("acquire", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := d.Load(ctx, fmt.Sprintf("acq-%d", i), datadriver.LoadOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire/baseline", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := plain.HGetAll(ctx, r.Namespace+fmt.Sprintf(":base-acq-%d", i)).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})

	p, err := d.Join(ctx, "save")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("save", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = p.Update(func(d *player) { d.Coins++ })
			if err := p.Save(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("save/baseline", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := plain.HSet(ctx, r.Namespace+":base-save", "data", raw, "ver", i).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})

	// A whole session: acquire, one save, save-and-release (3 round trips).
	b.Run("session", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q, err := d.Join(ctx, "cycle")
			if err != nil {
				b.Fatal(err)
			}
			_ = q.Update(func(d *player) { d.Coins++ })
			if err := q.Save(ctx); err != nil {
				b.Fatal(err)
			}
			_ = q.Update(func(d *player) { d.Coins++ })
			if err := q.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("session/baseline", func(b *testing.B) {
		b.ReportAllocs()
		k := r.Namespace + ":base-cycle"
		for i := 0; b.Loop(); i++ {
			if err := plain.HGetAll(ctx, k).Err(); err != nil {
				b.Fatal(err)
			}
			if err := plain.HSet(ctx, k, "data", raw, "ver", i).Err(); err != nil {
				b.Fatal(err)
			}
			if err := plain.HSet(ctx, k, "data", raw, "ver", i, "lock", "").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})

	// save-and-release alone: the acquire before it runs with the timer off.
	b.Run("release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			q, err := d.Join(ctx, "rel")
			if err != nil {
				b.Fatal(err)
			}
			_ = q.Update(func(d *player) { d.Coins++ })
			b.StartTimer()
			if err := q.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("release/baseline", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			_ = plain.HGetAll(ctx, r.Namespace+":base-rel").Err()
			b.StartTimer()
			if err := plain.HSet(ctx, r.Namespace+":base-rel", "data", raw, "ver", i, "lock", "").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
