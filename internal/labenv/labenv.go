// Package labenv gives the demo (playerdata demo) and the bench
// (playerdata-bench) their Redis and NATS: the servers named by URL, or,
// when none is named, a Redis (miniredis) and a NATS server embedded in
// the process; and a fresh namespace whose keys are deleted at the end.
// It is for those two lab tools, not for the operator commands, which only
// ever reach real servers.
package labenv

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// Connection bounds: an unreachable server is reported within a few
// seconds, never waited on.
const (
	// DialTimeout bounds one TCP dial (Redis) or one server attempt (NATS).
	DialTimeout = 2 * time.Second
	// PingTimeout bounds the first round trip, dial included.
	PingTimeout = 3 * time.Second
	// closeTimeout bounds the deletion of the namespace's keys.
	closeTimeout = 5 * time.Second
)

// Config says which servers to use.
type Config struct {
	// RedisURL is the Redis to use; "" embeds one.
	// default: "" (embedded miniredis)
	RedisURL string
	// NATSURL is the NATS to use; "" embeds one.
	// default: "" (embedded nats-server)
	NATSURL string
	// Prefix starts the run's namespace, "<Prefix>-<8 hex>". Required.
	Prefix string
	// Tool names the NATS probe connection ("playerdata demo").
	// default: "playerdata"
	Tool string
}

// Env is where a demo or bench runs: Redis, NATS and a fresh namespace.
type Env struct {
	// Namespace is the run's fresh namespace.
	Namespace string
	// RedisDesc and NATSDesc say which servers these are, for a header:
	// embedded, or the URL with its password hidden.
	RedisDesc, NATSDesc string
	// Embedded says Redis is the embedded miniredis; EmbeddedNATS the same
	// of NATS.
	Embedded, EmbeddedNATS bool
	// RedisOptions returns a fresh copy of the options of a Redis client.
	RedisOptions func() *redis.Options
	// NATSURL is the NATS to connect to.
	NATSURL string
	// Admin is the run's own Redis client (record reads, clean-up).
	Admin *redis.Client

	closers []func() // run in reverse by Close
}

// Start starts (or reaches) Redis and NATS and picks the namespace. A
// server that cannot be reached is an error within a few seconds.
func Start(ctx context.Context, cfg Config) (*Env, error) {
	env := &Env{}
	if err := env.start(ctx, cfg); err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// start does Start's work; on error the caller closes what it started.
func (env *Env) start(ctx context.Context, cfg Config) error {
	var b [4]byte
	if _, err := crand.Read(b[:]); err != nil {
		return fmt.Errorf("pick a namespace: %w", err)
	}
	env.Namespace = cfg.Prefix + "-" + hex.EncodeToString(b[:])
	if err := env.startRedis(ctx, cfg.RedisURL); err != nil {
		return err
	}
	return env.startNATS(cfg)
}

// startRedis embeds a Redis when url is "", else checks that url answers.
func (env *Env) startRedis(ctx context.Context, url string) error {
	if url == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return fmt.Errorf("start the embedded Redis: %w", err)
		}
		env.closers = append(env.closers, mr.Close)
		addr := mr.Addr()
		env.Embedded = true
		env.RedisDesc = "embedded miniredis on " + addr + " (no --redis or REDIS_URL given)"
		env.RedisOptions = func() *redis.Options {
			return &redis.Options{Addr: addr, DialTimeout: DialTimeout, DialerRetries: 1, ContextTimeoutEnabled: true}
		}
	} else {
		if _, err := RedisOptions(url); err != nil {
			return err
		}
		env.RedisDesc = RedactURL(url)
		env.RedisOptions = func() *redis.Options {
			opt, _ := RedisOptions(url) // parsed once above
			return opt
		}
	}
	opt := env.RedisOptions()
	admin := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if err := admin.Ping(pctx).Err(); err != nil {
		_ = admin.Close()
		if pctx.Err() != nil && err == pctx.Err() {
			err = fmt.Errorf("no answer within %s", PingTimeout)
		}
		return fmt.Errorf("cannot reach Redis at %s: %w", opt.Addr, err)
	}
	env.Admin = admin
	env.closers = append(env.closers, func() { _ = admin.Close() })
	if !env.Embedded {
		env.closers = append(env.closers, env.deleteKeys)
	}
	return nil
}

// startNATS embeds a NATS server when cfg.NATSURL is "", else checks that
// it answers.
func (env *Env) startNATS(cfg Config) error {
	if cfg.NATSURL == "" {
		srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
		if err != nil {
			return fmt.Errorf("start the embedded NATS server: %w", err)
		}
		srv.Start()
		env.closers = append(env.closers, func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(PingTimeout) {
			return fmt.Errorf("the embedded NATS server did not start within %s", PingTimeout)
		}
		env.NATSURL, env.EmbeddedNATS = srv.ClientURL(), true
		env.NATSDesc = "embedded nats-server on " + env.NATSURL + " (no --nats or NATS_URL given)"
		return nil
	}
	name := cfg.Tool
	if name == "" {
		name = "playerdata"
	}
	nc, err := nats.Connect(cfg.NATSURL, nats.Name(name+" probe"), nats.Timeout(DialTimeout))
	if err != nil {
		return fmt.Errorf("cannot reach NATS at %s: %w", RedactURL(cfg.NATSURL), err)
	}
	nc.Close()
	env.NATSURL, env.NATSDesc = cfg.NATSURL, RedactURL(cfg.NATSURL)
	return nil
}

// Close stops what Start started, last first, deleting the namespace's
// keys from a real Redis.
func (env *Env) Close() {
	for _, c := range slices.Backward(env.closers) {
		c()
	}
	env.closers = nil
}

// deleteKeys deletes every key of the run's namespace from a real Redis.
func (env *Env) deleteKeys() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	match := GlobEscape(env.Namespace) + ":*"
	var cursor uint64
	for {
		keys, next, err := env.Admin.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			_ = env.Admin.Del(ctx, keys...).Err()
		}
		if next == 0 {
			return
		}
		cursor = next
	}
}

// RedisOptions parses a Redis URL ("redis://[user:pass@]host:port/db",
// "rediss://...", "unix://...") or a bare "host:port" into the options of
// one client, with short timeouts.
func RedisOptions(raw string) (*redis.Options, error) {
	var opt *redis.Options
	if strings.Contains(raw, "://") {
		var err error
		if opt, err = redis.ParseURL(raw); err != nil {
			return nil, fmt.Errorf("bad Redis URL: %w", err)
		}
	} else {
		opt = &redis.Options{Addr: raw}
	}
	opt.DialTimeout = DialTimeout
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true // a ctx deadline bounds each call (SaveTimeout)
	return opt, nil
}

// RedactURL hides a password (or a bare token) in a URL shown in a message.
func RedactURL(u string) string {
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

// GlobEscape escapes the SCAN MATCH metacharacters of s.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
