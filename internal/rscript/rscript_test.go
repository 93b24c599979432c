package rscript_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// The tests that SCRIPT FLUSH run on a Redis of their own: on the shared one
// (REDIS_URL, which CI gives every package at once) the flush would make
// another package's test, counting its script calls, see an EVALSHA answered
// NOSCRIPT and an EVAL more than its code sends.

func TestRunFallsBackToEval(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	incr := rscript.New("incr", "return redis.call('INCR', KEYS[1])")
	echo := rscript.New("echo", "return ARGV[1]")
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

func TestCatalogIdentifiesByName(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	incr := rscript.New("incr", "return redis.call('INCR', KEYS[1])")
	echo := rscript.New("echo", "return ARGV[1]")
	other := rscript.New("other", "return 1")
	cat := rscript.NewCatalog(incr, echo)

	var seen []rscript.Invocation
	var foreign int
	c.AddHook(observeHook(func(cmd redis.Cmder) {
		if in, ok := cat.Identify(cmd); ok {
			seen = append(seen, in)
		} else {
			foreign++
		}
	}))
	if err := c.ScriptFlush(ctx).Err(); err != nil { // the first Run of each falls back to EVAL
		t.Fatal(err)
	}
	foreign = 0
	for range 2 {
		if err := incr.Run(ctx, c, []string{r.Key("n")}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := echo.Run(ctx, c, nil, "hello", 7).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Run(ctx, c, nil).Err(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range seen {
		names = append(names, in.Name())
	}
	// EVALSHA (NOSCRIPT) and EVAL for the first call of each, EVALSHA after.
	want := []string{"incr", "incr", "echo", "echo", "incr", "echo"}
	if !slices.Equal(names, want) {
		t.Fatalf("identified %v, want %v", names, want)
	}
	if in := seen[len(seen)-1]; !slices.Equal(in.Args, []string{"hello", "7"}) || len(in.Keys) != 0 {
		t.Errorf("echo's keys %v args %v, want none and [hello 7]", in.Keys, in.Args)
	}
	if in := seen[0]; !slices.Equal(in.Keys, []string{r.Key("n")}) {
		t.Errorf("incr's keys %v", in.Keys)
	}
	if foreign != 2 { // other's EVALSHA and its EVAL
		t.Errorf("%d commands left unidentified, want 2 (the script not in the catalog)", foreign)
	}
}

// observeHook calls f with every command after it ran.
type observeHook func(cmd redis.Cmder)

func (h observeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h observeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h(cmd)
		return err
	}
}
func (h observeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
