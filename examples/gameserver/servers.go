package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// startWithin bounds reaching Redis and NATS (or starting the embedded
// ones): a server that does not answer is an error, not a hang.
const startWithin = 5 * time.Second

// conns are the server's Redis and NATS connections, and the embedded
// servers behind them when no URL was given.
type conns struct {
	rdb                 *redis.Client
	nc                  *nats.Conn
	redisDesc, natsDesc string
	closers             []func() // run last first by close
}

// connect reaches the Redis and NATS of cfg, starting embedded ones for
// the URLs left empty.
func connect(ctx context.Context, cfg config) (*conns, error) {
	c := &conns{}
	if err := c.open(ctx, cfg); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *conns) open(ctx context.Context, cfg config) error {
	opt := &redis.Options{}
	if cfg.redisURL == "" {
		mr := miniredis.NewMiniRedis() // in process, with Lua: enough for one machine
		if err := mr.Start(); err != nil {
			return fmt.Errorf("start the embedded Redis: %w", err)
		}
		c.closers = append(c.closers, mr.Close)
		opt.Addr = mr.Addr()
		c.redisDesc = "embedded miniredis on " + mr.Addr()
	} else {
		var err error
		if opt, err = redis.ParseURL(cfg.redisURL); err != nil {
			return fmt.Errorf("--redis: %w", err)
		}
		c.redisDesc = opt.Addr
	}
	opt.ContextTimeoutEnabled = true // a call's ctx deadline bounds it on the socket too
	c.rdb = redis.NewClient(opt)
	c.closers = append(c.closers, func() { _ = c.rdb.Close() })
	pctx, cancel := context.WithTimeout(ctx, startWithin)
	defer cancel()
	if err := c.rdb.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("cannot reach Redis at %s: %w", opt.Addr, err)
	}

	natsURL := cfg.natsURL
	if natsURL == "" {
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
		if err != nil {
			return fmt.Errorf("start the embedded NATS server: %w", err)
		}
		srv.Start()
		c.closers = append(c.closers, func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(startWithin) {
			return fmt.Errorf("the embedded NATS server did not start within %s", startWithin)
		}
		natsURL = srv.ClientURL()
		c.natsDesc = "embedded nats-server on " + natsURL
	} else {
		c.natsDesc = withoutCredentials(natsURL)
	}
	nc, err := nats.Connect(natsURL, nats.Name("playerdata example gameserver"), nats.Timeout(startWithin))
	if err != nil {
		return fmt.Errorf("cannot reach NATS at %s: %w", c.natsDesc, err)
	}
	c.nc = nc
	c.closers = append(c.closers, nc.Close)
	return nil
}

// close closes the connections, then stops the embedded servers.
func (c *conns) close() {
	for _, f := range slices.Backward(c.closers) {
		f()
	}
	c.closers = nil
}

// withoutCredentials is a NATS URL list ("nats://u:p@a:4222,nats://b:4222")
// fit to print: each URL without its user and password.
func withoutCredentials(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = nil
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
