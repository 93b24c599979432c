package testsupport

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestCommandCounter(t *testing.T) {
	t.Parallel()
	script := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
	tests := []struct {
		name     string
		do       func(ctx context.Context, c redis.UniversalClient, r *Redis) error
		commands []string
	}{
		{"single command", func(ctx context.Context, c redis.UniversalClient, r *Redis) error {
			return c.Set(ctx, r.Key("a"), 1, 0).Err()
		}, []string{"set"}},
		{"pipeline of 3", func(ctx context.Context, c redis.UniversalClient, r *Redis) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, r.Key("a"), 1, 0)
				p.Incr(ctx, r.Key("a"))
				p.Get(ctx, r.Key("a"))
				return nil
			})
			return err
		}, []string{"set", "incr", "get"}},
		{"cached script", func(ctx context.Context, c redis.UniversalClient, r *Redis) error {
			return script.Run(ctx, c, []string{r.Key("n")}).Err()
		}, []string{"evalsha"}},
	}
	for _, kind := range ownRedisKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := kind.start(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := r.Client(t)
					var counter CommandCounter
					c.AddHook(&counter)
					if err := script.Load(ctx, c).Err(); err != nil {
						t.Fatal(err)
					}
					counter.Reset()
					if err := tt.do(ctx, c, r); err != nil {
						t.Fatal(err)
					}
					if got := counter.RoundTrips(); got != 1 {
						t.Errorf("RoundTrips = %d, want 1", got)
					}
					if got := counter.Commands(); !slices.Equal(got, tt.commands) {
						t.Errorf("Commands = %q, want %q", got, tt.commands)
					}
				})
			}

			t.Run("fresh connection", func(t *testing.T) {
				c := r.Client(t)
				var counter CommandCounter
				c.AddHook(&counter)
				if err := c.Set(ctx, r.Key("a"), 1, 0).Err(); err != nil {
					t.Fatal(err)
				}
				// The handshake (HELLO, CLIENT SETINFO) is not a round trip
				// of the application's.
				if got, want := counter.Commands(), []string{"set"}; !slices.Equal(got, want) {
					t.Errorf("Commands = %q, want %q", got, want)
				}
				if got := counter.RoundTrips(); got != 1 {
					t.Errorf("RoundTrips = %d, want 1", got)
				}
				if got := counter.Dials(); got != 1 {
					t.Errorf("Dials = %d, want 1", got)
				}
			})

			t.Run("script cache miss", func(t *testing.T) {
				c := r.Client(t)
				var counter CommandCounter
				c.AddHook(&counter)
				if err := c.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				counter.Reset()
				if err := script.Run(ctx, c, []string{r.Key("n")}).Err(); err != nil {
					t.Fatal(err)
				}
				if got, want := counter.Commands(), []string{"evalsha", "eval"}; !slices.Equal(got, want) {
					t.Errorf("Commands = %q, want %q", got, want)
				}
				if got := counter.RoundTrips(); got != 2 {
					t.Errorf("RoundTrips = %d, want 2", got)
				}
				if got := counter.Dials(); got != 0 {
					t.Errorf("Dials = %d after Reset on a warm pool, want 0", got)
				}
			})
		})
	}
}

func TestCommandCounterConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := startRedis(t, redisConfig{})
	c := r.Client(t)
	var counter CommandCounter
	c.AddHook(&counter)
	const workers, each = 8, 25
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for range each {
				if err = c.Incr(ctx, r.Key("n")).Err(); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.RoundTrips(); got != workers*each {
		t.Errorf("RoundTrips = %d, want %d", got, workers*each)
	}
	if got := len(counter.Commands()); got != workers*each {
		t.Errorf("len(Commands) = %d, want %d", got, workers*each)
	}
	if counter.Dials() < 1 {
		t.Errorf("Dials = %d, want at least 1", counter.Dials())
	}
}
