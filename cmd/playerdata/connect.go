package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/labenv"
)

// Connection bounds: an unreachable server is reported within a few
// seconds, never waited on (the lab tools' bounds).
const (
	dialTimeout = labenv.DialTimeout
	pingTimeout = labenv.PingTimeout
)

// The deployments a --redis URL can lead to.
const (
	deployStandalone = "standalone" // one Redis (a primary, with or without replicas)
	deployCluster    = "cluster"    // Redis Cluster, reached through any node
	deploySentinel   = "sentinel"   // a primary found through Sentinel
)

// sentinelParam is the query parameter that makes a URL name Sentinels
// rather than Redis: go-redis's ParseFailoverURL form,
// "redis://sentinel:26379?master_name=mymaster&addr=sentinel2:26379".
const sentinelParam = "master_name"

// redisConn is an open client of one deployment.
type redisConn struct {
	rdb  redis.UniversalClient
	kind string // deployStandalone, deployCluster or deploySentinel
	desc string // the URL, password hidden, for messages
}

// redisOptions parses a Redis URL ("redis://[user:pass@]host:port/db",
// "rediss://...", "unix://...") or a bare "host:port" into the options of
// one node, with short timeouts (labenv.RedisOptions). The "addr"
// parameters of a cluster URL are left to clusterOptions.
func redisOptions(raw string) (*redis.Options, error) {
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("bad Redis URL: %w", err)
		}
		q := u.Query()
		q.Del("addr")
		u.RawQuery = q.Encode()
		raw = u.String()
	}
	return labenv.RedisOptions(raw)
}

// clusterOptions are the options of a cluster client seeded with the node
// of raw (and its "addr" parameters), with the node's credentials and TLS.
func clusterOptions(raw string, node *redis.Options) *redis.ClusterOptions {
	addrs := []string{node.Addr}
	if u, err := url.Parse(raw); err == nil {
		addrs = append(addrs, u.Query()["addr"]...)
	}
	return &redis.ClusterOptions{Addrs: addrs, Username: node.Username, Password: node.Password, TLSConfig: node.TLSConfig,
		DialTimeout: dialTimeout, DialerRetries: 1, ContextTimeoutEnabled: true}
}

// failoverOptions parses a Sentinel URL (ParseFailoverURL's form): the
// URL's user and password serve for the Sentinels and the primary alike.
func failoverOptions(raw string) (*redis.FailoverOptions, error) {
	opt, err := redis.ParseFailoverURL(raw)
	if err != nil {
		return nil, fmt.Errorf("bad Redis Sentinel URL: %w", err)
	}
	if opt.MasterName == "" {
		return nil, errors.New("bad Redis Sentinel URL: master_name is empty")
	}
	if opt.Username == "" && opt.Password == "" {
		opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
	}
	opt.DialTimeout = dialTimeout
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// isSentinelURL reports whether raw names Sentinels (has master_name).
func isSentinelURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.Contains(raw, "://") && u.Query().Has(sentinelParam)
}

// ping checks within pingTimeout that c answers.
func ping(ctx context.Context, c redis.UniversalClient, desc string) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if ctx.Err() != nil && err == ctx.Err() {
			err = fmt.Errorf("no answer within %s", pingTimeout)
		}
		return fmt.Errorf("cannot reach Redis at %s: %w", desc, err)
	}
	return nil
}

// newRedis returns a client for opt and checks with a PING that the server
// answers within pingTimeout.
func newRedis(ctx context.Context, opt *redis.Options) (*redis.Client, error) {
	c := redis.NewClient(opt)
	if err := ping(ctx, c, opt.Addr); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// connectRedis connects to the deployment raw names and finds out which
// kind it is, as "redis-cli -c" users expect: a URL with master_name names
// Sentinels; any other URL names one node, whose INFO server says whether
// it is a cluster node (the client is then a cluster client seeded with
// it), a Sentinel (the client follows the one primary it watches) or a
// plain Redis.
func connectRedis(ctx context.Context, raw string) (*redisConn, error) {
	desc := redactURL(raw)
	if isSentinelURL(raw) {
		opt, err := failoverOptions(raw)
		if err != nil {
			return nil, err
		}
		return connectSentinel(ctx, opt, desc)
	}
	opt, err := redisOptions(raw)
	if err != nil {
		return nil, err
	}
	node, err := newRedis(ctx, opt)
	if err != nil {
		return nil, err
	}
	mode, err := serverMode(ctx, node)
	switch {
	case err != nil:
		_ = node.Close()
		return nil, fmt.Errorf("find out what %s is: %w", desc, err)
	case mode == deployCluster:
		_ = node.Close()
		c := redis.NewClusterClient(clusterOptions(raw, opt))
		if err := ping(ctx, c, desc); err != nil {
			_ = c.Close()
			return nil, err
		}
		return &redisConn{rdb: c, kind: deployCluster, desc: desc}, nil
	case mode == deploySentinel:
		name, err := soleMaster(ctx, node, desc)
		_ = node.Close()
		if err != nil {
			return nil, err
		}
		return connectSentinel(ctx, &redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{opt.Addr},
			SentinelUsername: opt.Username, SentinelPassword: opt.Password, Username: opt.Username, Password: opt.Password,
			TLSConfig: opt.TLSConfig, DialTimeout: dialTimeout, ContextTimeoutEnabled: true}, desc)
	}
	return &redisConn{rdb: node, kind: deployStandalone, desc: desc}, nil
}

// connectSentinel connects to the primary the Sentinels of opt name.
func connectSentinel(ctx context.Context, opt *redis.FailoverOptions, desc string) (*redisConn, error) {
	c := redis.NewFailoverClient(opt)
	if err := ping(ctx, c, desc+" (Sentinel, master "+opt.MasterName+")"); err != nil {
		_ = c.Close()
		return nil, err
	}
	return &redisConn{rdb: c, kind: deploySentinel, desc: desc}, nil
}

// serverMode reads redis_mode from INFO server: standalone, cluster or
// sentinel. A server without it (an older or embedded one) is standalone.
func serverMode(ctx context.Context, c *redis.Client) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("INFO server: %w", err)
	}
	switch infoField(info, "redis_mode") {
	case "cluster":
		return deployCluster, nil
	case "sentinel":
		return deploySentinel, nil
	}
	return deployStandalone, nil
}

// soleMaster is the name of the one primary the Sentinel c watches; a
// Sentinel that watches several needs the URL to name one.
func soleMaster(ctx context.Context, c *redis.Client, desc string) (string, error) {
	sc := redis.NewSentinelClient(c.Options())
	defer sc.Close()
	res, err := sc.Masters(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("ask the Sentinel at %s for its primaries (SENTINEL MASTERS): %w", desc, err)
	}
	var names []string
	for _, m := range res {
		switch fields := m.(type) {
		case map[any]any: // RESP3
			if name, ok := fields["name"].(string); ok {
				names = append(names, name)
			}
		case []any: // RESP2: name, value, name, value...
			for i := 0; i+1 < len(fields); i += 2 {
				if k, _ := fields[i].(string); k == "name" {
					name, _ := fields[i+1].(string)
					names = append(names, name)
				}
			}
		}
	}
	slices.Sort(names)
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("%s is a Sentinel that watches no primary", desc)
	}
	return "", fmt.Errorf("%s is a Sentinel that watches %s: name one with ?%s=NAME", desc, strings.Join(names, ", "), sentinelParam)
}

// infoField is the value of field in an INFO answer ("" when absent).
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
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
func redactURL(u string) string { return labenv.RedactURL(u) }
