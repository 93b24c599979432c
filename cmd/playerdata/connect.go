package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// Connection bounds: an unreachable server is reported within a few
// seconds, never waited on.
const (
	// dialTimeout bounds one TCP dial (Redis) or one server attempt (NATS).
	dialTimeout = 2 * time.Second
	// pingTimeout bounds the first round trip, dial included.
	pingTimeout = 3 * time.Second
)

// redisOptions parses a Redis URL ("redis://[user:pass@]host:port/db",
// "rediss://...", "unix://...") or a bare "host:port", with short timeouts.
func redisOptions(raw string) (*redis.Options, error) {
	var opt *redis.Options
	if strings.Contains(raw, "://") {
		var err error
		if opt, err = redis.ParseURL(raw); err != nil {
			return nil, fmt.Errorf("bad Redis URL: %w", err)
		}
	} else {
		opt = &redis.Options{Addr: raw}
	}
	opt.DialTimeout = dialTimeout
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true // a ctx deadline bounds each call (SaveTimeout)
	return opt, nil
}

// newRedis returns a client for opt and checks with a PING that the server
// answers within pingTimeout.
func newRedis(ctx context.Context, opt *redis.Options) (*redis.Client, error) {
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		if ctx.Err() != nil && err == ctx.Err() {
			err = fmt.Errorf("no answer within %s", pingTimeout)
		}
		return nil, fmt.Errorf("cannot reach Redis at %s: %w", opt.Addr, err)
	}
	return c, nil
}

// connectRedis parses raw and connects (see redisOptions, newRedis).
func connectRedis(ctx context.Context, raw string) (*redis.Client, error) {
	opt, err := redisOptions(raw)
	if err != nil {
		return nil, err
	}
	return newRedis(ctx, opt)
}

// connectNATS connects to the NATS server(s) at url under a connection
// name, failing within about dialTimeout per server when none answers.
func connectNATS(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.Timeout(dialTimeout))
	if err != nil {
		return nil, fmt.Errorf("cannot reach NATS at %s: %w", redactURL(url), err)
	}
	return nc, nil
}

// redactURL hides a password (or a bare token) in a URL shown in a message.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return u
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return scheme + "://***" + rest[at:] // nats://<token>@host
	}
	return scheme + "://" + user + ":***" + rest[at:]
}
