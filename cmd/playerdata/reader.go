package main

// What the operator commands (inspect, presence, locks, unlock) share: where
// Redis is, which namespace and presence hash to read, and a presence reader
// that reads as the servers do but never beats.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// defaultRedisURL is where the operator commands look without --redis or
// REDIS_URL.
const defaultRedisURL = "redis://127.0.0.1:6379"

// readerJob is the JobID presence reads are made under; it never beats.
const readerJob = "playerdata-cli"

// minPresenceTTL is the shortest --presence-ttl accepted: presence wants a
// beat shorter than its TTL, and the reader's beat is TTL/4.
const minPresenceTTL = 4 * time.Millisecond

// readFlags are the flags every operator command takes.
type readFlags struct {
	conn           connFlags
	presenceKey    string
	presenceShards int // 0: found in the layout hash
	presenceTTL    time.Duration
	json           bool
}

// add adds --redis, --namespace, --presence-key, --presence-shards,
// --presence-ttl and --json.
func (f *readFlags) add(c *command) {
	f.conn.addRedis(c.fs)
	c.fs.StringVar(&f.presenceKey, "presence-key", presencecore.DefaultKeyName, "")
	c.fs.IntVar(&f.presenceShards, "presence-shards", 0, "")
	c.fs.DurationVar(&f.presenceTTL, "presence-ttl", presencecore.DefaultTTL, "")
	c.fs.BoolVar(&f.json, "json", false, "")
}

// check refuses flag values no deployment can have, as usage mistakes.
func (f *readFlags) check(c *command) error {
	switch {
	case f.presenceKey == "":
		return c.mistake("--presence-key is empty (the servers' NodeConfig.PresenceKey; default %s)", presencecore.DefaultKeyName)
	case f.presenceShards < 0 || f.presenceShards > presencecore.MaxShards:
		return c.mistake("--presence-shards %d: want the servers' NodeConfig.PresenceShards, 1 to %d (or 0: read it from Redis)",
			f.presenceShards, presencecore.MaxShards)
	case f.presenceTTL < minPresenceTTL:
		return c.mistake("--presence-ttl %s is too short (the servers' PresenceTTL; default %s)", f.presenceTTL, presencecore.DefaultTTL)
	}
	return nil
}

// redisURL is --redis, else REDIS_URL, else the local default.
func (f *readFlags) redisURL() string {
	f.conn.fromEnv()
	if f.conn.redisURL == "" {
		return defaultRedisURL
	}
	return f.conn.redisURL
}

// presenceHashKey is the presence hash of a deployment, named as
// datadriver.Node names it: "<namespace>:<name>", or name alone without a
// namespace. (presencecore.KeyFor covers only the default name.)
func presenceHashKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + ":" + name
}

// reader is an open connection to the Redis of one deployment.
type reader struct {
	rdb     redis.UniversalClient
	kind    string // deployStandalone, deployCluster or deploySentinel
	pres    *presencecore.Presence
	ns      string
	presKey string        // the full key of the presence hash (its shard 0)
	ttl     time.Duration // the servers' PresenceTTL
	layout  shardLayout   // the shard count read with, and how it was found
}

// openProfile checks f and the profile driver/key that c names, then opens
// the reader (the caller closes it).
func (f *readFlags) openProfile(ctx context.Context, c *command, driver, key string) (*reader, error) {
	if err := f.check(c); err != nil {
		return nil, err
	}
	if err := checkProfile(c.name, driver, key); err != nil {
		return nil, err
	}
	return f.open(ctx)
}

// open connects to the Redis of f (a PING within a few seconds), finds the
// presence shard count the servers use (unless --presence-shards gives it)
// and builds a presence reader of its hash; the caller closes the reader.
func (f *readFlags) open(ctx context.Context) (*reader, error) {
	conn, err := connectRedis(ctx, f.redisURL())
	if err != nil {
		return nil, err
	}
	r := &reader{rdb: conn.rdb, kind: conn.kind, ns: f.conn.namespace, ttl: f.presenceTTL,
		presKey: presenceHashKey(f.conn.namespace, f.presenceKey)}
	if r.layout, err = r.readLayout(ctx, f.presenceShards); err != nil {
		_ = r.Close()
		return nil, err
	}
	r.pres, err = presencecore.New(r.rdb, presencecore.Config{Key: r.presKey, JobID: readerJob, TTL: f.presenceTTL,
		Beat: f.presenceTTL / 4, Shards: r.layout.Shards})
	if err != nil {
		_ = r.Close()
		return nil, usagef("--presence-key %q: %w", f.presenceKey, err)
	}
	return r, nil
}

// Close closes the Redis client.
func (r *reader) Close() error { return r.rdb.Close() }

// nodeOf is the client of the node that serves key: the master of its slot
// on a Redis Cluster, the client itself elsewhere. Reads of several keys of
// one slot go there in one pipeline, with that node's TIME, which is the
// clock the servers' scripts on those keys read.
func (r *reader) nodeOf(ctx context.Context, key string) (redis.Cmdable, error) {
	c, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return r.rdb, nil
	}
	n, err := c.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("find the master of %s: %w", key, err)
	}
	return n, nil
}

// masters are a client of each master, sorted by address: every master of
// a Redis Cluster, the client itself elsewhere. A scan goes over each.
func (r *reader) masters(ctx context.Context) ([]redis.Cmdable, error) {
	c, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{r.rdb}, nil
	}
	var (
		mu  sync.Mutex
		all []*redis.Client
	)
	err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		all = append(all, m)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the cluster's masters: %w", err)
	}
	slices.SortFunc(all, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	out := make([]redis.Cmdable, len(all))
	for i, m := range all {
		out[i] = m
	}
	return out, nil
}

// presenceHashExists reports whether any shard of the presence hash exists:
// a deployment whose servers beat presence always has one.
func (r *reader) presenceHashExists(ctx context.Context) (bool, error) {
	for _, k := range r.pres.Keys() { // one EXISTS per key: the shards are in different slots
		n, err := r.rdb.Exists(ctx, k).Result()
		if err != nil {
			return false, fmt.Errorf("read the presence hash %s: %w", k, err)
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
}
