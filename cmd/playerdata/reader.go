package main

// What the operator commands (inspect, presence, locks, unlock) share: where
// Redis is, which namespace and presence hash to read, and a presence reader
// that reads as the servers do but never beats.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/presence"
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
	presenceShards int
	presenceTTL    time.Duration
	json           bool
}

// add adds --redis, --namespace, --presence-key, --presence-shards,
// --presence-ttl and --json.
func (f *readFlags) add(c *command) {
	f.conn.addRedis(c.fs)
	c.fs.StringVar(&f.presenceKey, "presence-key", presence.DefaultKeyName, "")
	c.fs.IntVar(&f.presenceShards, "presence-shards", presence.DefaultShards, "")
	c.fs.DurationVar(&f.presenceTTL, "presence-ttl", presence.DefaultTTL, "")
	c.fs.BoolVar(&f.json, "json", false, "")
}

// check refuses flag values no deployment can have, as usage mistakes.
func (f *readFlags) check(c *command, stderr io.Writer) error {
	switch {
	case f.presenceKey == "":
		return c.mistake(stderr, "--presence-key is empty (the servers' NodeConfig.PresenceKey; default %s)", presence.DefaultKeyName)
	case f.presenceShards < 1 || f.presenceShards > presence.MaxShards:
		return c.mistake(stderr, "--presence-shards %d: want the servers' NodeConfig.PresenceShards, 1 to %d", f.presenceShards, presence.MaxShards)
	case f.presenceTTL < minPresenceTTL:
		return c.mistake(stderr, "--presence-ttl %s is too short (the servers' PresenceTTL; default %s)", f.presenceTTL, presence.DefaultTTL)
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
// namespace. (presence.KeyFor covers only the default name.)
func presenceHashKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + ":" + name
}

// reader is an open connection to the Redis of one deployment.
type reader struct {
	rdb     *redis.Client
	pres    *presence.Presence
	ns      string
	presKey string        // the full key of the presence hash (its shard 0)
	ttl     time.Duration // the servers' PresenceTTL
}

// open connects to the Redis of f (a PING within a few seconds) and builds
// a presence reader of its hash; the caller closes the reader.
func (f *readFlags) open(ctx context.Context) (*reader, error) {
	rdb, err := connectRedis(ctx, f.redisURL())
	if err != nil {
		return nil, err
	}
	key := presenceHashKey(f.conn.namespace, f.presenceKey)
	pres, err := presence.New(rdb, presence.Config{Key: key, JobID: readerJob, TTL: f.presenceTTL, Beat: f.presenceTTL / 4,
		Shards: f.presenceShards})
	if err != nil {
		_ = rdb.Close()
		return nil, usagef("--presence-key %q: %w", f.presenceKey, err)
	}
	return &reader{rdb: rdb, pres: pres, ns: f.conn.namespace, presKey: key, ttl: f.presenceTTL}, nil
}

// Close closes the Redis client.
func (r *reader) Close() error { return r.rdb.Close() }

// presenceHashExists reports whether any shard of the presence hash exists:
// a deployment whose servers beat presence always has one.
func (r *reader) presenceHashExists(ctx context.Context) (bool, error) {
	n, err := r.rdb.Exists(ctx, r.pres.Keys()...).Result()
	if err != nil {
		return false, fmt.Errorf("read the presence hash %s: %w", r.presKey, err)
	}
	return n > 0, nil
}
