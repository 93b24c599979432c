package testsupport

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

var _ redis.Hook = (*CommandCounter)(nil)

// CommandCounter is a go-redis hook that counts round trips: one per command
// sent on its own and one per pipeline or transaction pipeline, however many
// commands it holds. It also records the name of every command seen, in order
// ("evalsha", "eval", "hset", ...), and counts new connections.
//
// The count is of calls the application made, which is what a "one round trip
// per state change" claim is about: a retry inside go-redis is not a new round
// trip, and the handshake go-redis runs on a new connection in the middle of
// a call (HELLO, CLIENT SETINFO, which go-redis passes through the hooks too)
// is neither counted nor recorded; [CommandCounter.Dials] counts those
// connections instead.
//
// The zero value is ready to use and safe for concurrent use; add it to a
// client with client.AddHook(counter). The recorded names grow without bound
// until [CommandCounter.Reset], so a long benchmark should Reset it.
type CommandCounter struct {
	mu         sync.Mutex
	roundTrips int64
	dials      int64
	commands   []string
}

// inCall marks a context as inside a call c already counted, so the
// connection handshake go-redis runs with that context is not counted again.
type inCall struct{ c *CommandCounter }

// count records one round trip carrying cmds and returns the context to pass
// on, unless ctx is already inside a counted call.
func (c *CommandCounter) count(ctx context.Context, cmds ...redis.Cmder) context.Context {
	if ctx.Value(inCall{c}) != nil {
		return ctx
	}
	c.mu.Lock()
	c.roundTrips++
	for _, cmd := range cmds {
		c.commands = append(c.commands, cmd.Name())
	}
	c.mu.Unlock()
	return context.WithValue(ctx, inCall{c}, true)
}

// DialHook counts each new connection and then dials.
func (c *CommandCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		c.dials++
		c.mu.Unlock()
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one round trip and records the command's name.
func (c *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return next(c.count(ctx, cmd), cmd)
	}
}

// ProcessPipelineHook counts one round trip for the whole pipeline and
// records the name of each command in it (for a transaction pipeline that
// includes "multi" and "exec").
func (c *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return next(c.count(ctx, cmds...), cmds)
	}
}

// RoundTrips returns the number of commands and pipelines sent since the
// counter was made or last Reset.
func (c *CommandCounter) RoundTrips() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roundTrips
}

// Dials returns the number of connections opened since the counter was made
// or last Reset; it rises after a server restart, when clients reconnect.
func (c *CommandCounter) Dials() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// Commands returns a copy of the lower-case command names seen since the
// counter was made or last Reset, in the order they were sent.
func (c *CommandCounter) Commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.commands...)
}

// Reset sets every count to zero and forgets the recorded names.
func (c *CommandCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips = 0
	c.dials = 0
	c.commands = nil
}
