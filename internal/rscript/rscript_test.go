package rscript_test

import (
	"context"
	"testing"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

func TestRunFallsBackToEval(t *testing.T) {
	r := testsupport.StartRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	incr := redis.NewScript("return redis.call('INCR', KEYS[1])")
	echo := redis.NewScript("return ARGV[1]")
	calls := []rscript.Call{
		{Script: incr, Keys: []string{r.Key("n")}},
		{Script: echo, Args: []any{"hello"}},
		{Script: incr, Keys: []string{r.Key("n")}},
	}
	counter := &testsupport.CommandCounter{}
	c.AddHook(counter)
	for round, flush := range []bool{false, true, false} {
		if flush {
			if err := c.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		counter.Reset()
		vals, errs := rscript.Run(ctx, c, calls)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d call %d: %v", round, i, err)
			}
		}
		want := int64(2*round + 2)
		if vals[0] != want-1 || vals[1] != "hello" || vals[2] != want {
			t.Fatalf("round %d: answers %v, want %d, hello, %d: each call runs exactly once, in order", round, vals, want-1, want)
		}
		switch n := counter.RoundTrips(); {
		case flush && n != 2:
			t.Fatalf("after SCRIPT FLUSH: %d round trips, want 2 (EVALSHA pipeline, then EVAL pipeline)", n)
		case round == 2 && n != 1:
			t.Fatalf("with the scripts cached: %d round trips, want 1", n)
		}
	}
}
