// Package rediscount is a go-redis hook that counts round trips: the one
// command counter of the tests (testsupport re-exports it as
// CommandCounter) and of the benchmarks.
package rediscount

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

var _ redis.Hook = (*Counter)(nil)

// Counter is a go-redis hook that counts round trips: one per command
// sent on its own and one per pipeline or transaction pipeline, however many
// commands it holds (with Only set, only the commands sent on their own that
// Only accepts). It also records the name of every command seen, in order
// ("evalsha", "eval", "hset", ...), and counts new connections.
//
// The count is of calls the application made, which is what a "one round trip
// per state change" claim is about: a retry inside go-redis is not a new round
// trip, and the handshake go-redis runs on a new connection in the middle of
// a call (HELLO, CLIENT SETINFO, which go-redis passes through the hooks too)
// is neither counted nor recorded; [Counter.Dials] counts those
// connections instead.
//
// The zero value is ready to use and safe for concurrent use; add it to a
// client with client.AddHook(counter). The recorded names grow without bound
// until [Counter.Reset], so a long run should Reset it or set NoNames.
type Counter struct {
	// Only, when set, says which commands sent on their own are counted
	// and recorded; pipelines are then not counted. Nil counts everything.
	Only func(cmd redis.Cmder) bool
	// NoNames, when set, records no command names: a counter for a long
	// run, whose memory stays flat.
	NoNames bool

	mu         sync.Mutex
	roundTrips int64
	dials      int64
	commands   []string
}

// inCall marks a context as inside a call c already counted, so the
// connection handshake go-redis runs with that context is not counted again.
type inCall struct{ c *Counter }

// count records one round trip carrying cmds (a pipeline when piped) and
// returns the context to pass on, unless ctx is already inside a counted
// call or Only leaves the call out.
func (c *Counter) count(ctx context.Context, piped bool, cmds ...redis.Cmder) context.Context {
	if ctx.Value(inCall{c}) != nil {
		return ctx
	}
	if c.Only != nil && (piped || !c.Only(cmds[0])) {
		return ctx
	}
	c.mu.Lock()
	c.roundTrips++
	if !c.NoNames {
		for _, cmd := range cmds {
			c.commands = append(c.commands, cmd.Name())
		}
	}
	c.mu.Unlock()
	return context.WithValue(ctx, inCall{c}, true)
}

// DialHook counts each new connection and then dials.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		c.dials++
		c.mu.Unlock()
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one round trip and records the command's name.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return next(c.count(ctx, false, cmd), cmd)
	}
}

// ProcessPipelineHook counts one round trip for the whole pipeline and
// records the name of each command in it (for a transaction pipeline that
// includes "multi" and "exec").
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return next(c.count(ctx, true, cmds...), cmds)
	}
}

// RoundTrips returns the number of commands and pipelines sent since the
// counter was made or last Reset.
func (c *Counter) RoundTrips() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roundTrips
}

// Dials returns the number of connections opened since the counter was made
// or last Reset; it rises after a server restart, when clients reconnect.
func (c *Counter) Dials() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// Commands returns a copy of the lower-case command names seen since the
// counter was made or last Reset, in the order they were sent.
func (c *Counter) Commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.commands...)
}

// Reset sets every count to zero and forgets the recorded names.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips = 0
	c.dials = 0
	c.commands = nil
}
