package testsupport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// In a pipeline, Before and After act on each command: the one Before
// fails is never sent, the others land; After replaces an answer of a
// command that landed. A transaction goes whole, untouched by them.
func TestFaultHookActsOnEachCommandOfAPipeline(t *testing.T) {
	r := testsupport.StartRedis(t)
	c := r.Client(t)
	h := &testsupport.FaultHook{}
	c.AddHook(h)
	ctx := context.Background()
	a, b, x := r.Key("a"), r.Key("b"), r.Key("x")
	h.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" && cmd.Args()[1] == b {
			return testsupport.ErrInjected
		}
		return nil
	})
	h.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
		if cmd.Name() == "incr" && err == nil {
			return testsupport.ErrInjected // landed, answer lost
		}
		return nil
	})
	p := c.Pipeline()
	setA, setB, incr := p.Set(ctx, a, "1", 0), p.Set(ctx, b, "1", 0), p.Incr(ctx, x)
	_, _ = p.Exec(ctx)
	if setA.Err() != nil {
		t.Fatalf("SET a: %v, want it through", setA.Err())
	}
	if !errors.Is(setB.Err(), testsupport.ErrInjected) {
		t.Fatalf("SET b: %v, want the injected failure", setB.Err())
	}
	if !errors.Is(incr.Err(), testsupport.ErrInjected) {
		t.Fatalf("INCR x: %v, want its answer lost", incr.Err())
	}
	h.Clear()
	if n, _ := c.Exists(ctx, a, b).Result(); n != 1 {
		t.Fatalf("%d of a and b exist, want a only: a command Before failed is never sent", n)
	}
	if v, _ := c.Get(ctx, x).Int(); v != 1 {
		t.Fatalf("x = %d, want 1: the INCR whose answer was lost landed", v)
	}

	h.SetBefore(func(context.Context, redis.Cmder) error { return testsupport.ErrInjected })
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, b, "2", 0)
		return nil
	}); err != nil {
		t.Fatalf("a transaction: %v, want it passed through whole", err)
	}
	h.Clear()
	if v, _ := c.Get(ctx, b).Result(); v != "2" {
		t.Fatalf("b = %q after the transaction, want 2", v)
	}
}
