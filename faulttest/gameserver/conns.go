package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// conns are a server's Redis client, NATS connection (nil without a bus)
// and Node.
type conns struct {
	rdb  *redis.Client
	nc   *nats.Conn
	node *datadriver.Node
}

// openNode connects to Redis (one server, or the primary the sentinels
// name) and NATS, and starts the Node.
func openNode(ctx context.Context, cfg config, log *slog.Logger) (conns, error) {
	var c conns
	if cfg.sentinels != "" {
		c.rdb = redis.NewFailoverClient(failoverOptions(cfg))
	} else {
		c.rdb = redis.NewClient(redisOptions(cfg))
	}
	if cfg.natsURL != "" {
		nc, err := connectNATS(cfg, log)
		if err != nil {
			_ = c.rdb.Close()
			return c, err
		}
		c.nc = nc
	}
	ncfg := datadriver.NodeConfig{
		JobID: cfg.job, Redis: c.rdb, NATS: c.nc, Namespace: cfg.ns, Logger: log,
		Beat: cfg.beat, PresenceTTL: cfg.ttl, FenceMargin: cfg.fenceMargin,
		RequestRepeat: cfg.requestRepeat, ParkMin: cfg.parkMin, ParkMax: cfg.parkMax,
		SaveTimeout: cfg.saveTimeout, MinReplicas: cfg.minReplicas, SoloCalls: cfg.soloCalls,
	}
	if cfg.lostCommit && c.nc != nil {
		// The Node's own bus, as it would make it, wrapped by the fault.
		prefix := messaging.DefaultPrefix
		if cfg.ns != "" {
			prefix = cfg.ns + "." + prefix
		}
		b, err := messaging.NewNATSBus(c.nc, messaging.NATSConfig{Prefix: prefix, Logger: log})
		if err != nil {
			c.closeClients()
			return c, err
		}
		l := &lostCommits{log: log}
		c.rdb.AddHook(l.hook())
		ncfg.Bus = l.bus(b)
		l.toggleOnSignal(ctx)
	}
	node, err := datadriver.NewNode(ctx, ncfg)
	if err != nil {
		c.closeClients()
		return c, fmt.Errorf("new node: %w", err)
	}
	c.node = node
	return c, nil
}

// close closes the Node, then the clients.
func (c conns) close(ctx context.Context) {
	_ = c.node.Close(ctx)
	c.closeClients()
}

func (c conns) closeClients() {
	if c.nc != nil {
		c.nc.Close()
	}
	_ = c.rdb.Close()
}

// redisOptions are go-redis defaults, or short timeouts with -redis-timeout.
func redisOptions(cfg config) *redis.Options {
	opt := &redis.Options{Addr: cfg.redisAddr}
	if d := cfg.redisTimeout; d > 0 {
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = d, d, d
		opt.PoolTimeout = 2 * d
		opt.MaxRetries = 1
		opt.DialerRetries = 1
		opt.ContextTimeoutEnabled = true
	}
	return opt
}

// failoverOptions are redisOptions' for a failover client of -sentinels.
func failoverOptions(cfg config) *redis.FailoverOptions {
	o := redisOptions(cfg)
	return &redis.FailoverOptions{
		MasterName: cfg.master, SentinelAddrs: strings.Split(cfg.sentinels, ","),
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolTimeout: o.PoolTimeout, MaxRetries: o.MaxRetries, DialerRetries: o.DialerRetries,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
	}
}

// connectNATS connects with reconnects that never give up, so the server
// rides out a nats-server restart: it buffers publishes and re-subscribes.
func connectNATS(cfg config, log *slog.Logger) (*nats.Conn, error) {
	nc, err := nats.Connect(cfg.natsURL,
		nats.Name(cfg.job),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 50*time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.Timeout(time.Second),
		nats.PingInterval(time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrl()) }),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS %s: %w", cfg.natsURL, err)
	}
	return nc, nil
}
