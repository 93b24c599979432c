package datadriver

import (
	"github.com/redis/go-redis/v9"
)

// The presence beats, and the presence reads a proof of a holder's stop
// needs, never wait for a connection that saves hold: they go through a
// client of their own (NodeConfig.PresenceRedis, else one made from the
// Redis client's options: the same servers, credentials, TLS and, for
// Sentinel, the same dialer that follows the primary), with a small pool.
// A starved or saturated pool can make saves fail; it can never make a live
// server miss its beats and fence itself.

// presencePool is the pool of the presence client the Node makes: at most
// three beats in flight (presence bounds them) and a proof's read.
const presencePool = 4

// presenceClient returns the client presence uses, and whether the Node
// made it (and so closes it).
func presenceClient(cfg NodeConfig) (redis.UniversalClient, bool) {
	if cfg.PresenceRedis != nil {
		return cfg.PresenceRedis, false
	}
	switch c := cfg.Redis.(type) {
	case *redis.Client:
		o := *c.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = presencePool, 1, presencePool
		o.PushNotificationProcessor = nil // the client's own: each client makes its own
		return redis.NewClient(&o), true
	case *redis.ClusterClient:
		o := *c.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = presencePool, 1, presencePool
		o.PushNotificationProcessor = nil
		return redis.NewClusterClient(&o), true
	}
	return cfg.Redis, false // a client of another kind: shared (the Node logs it)
}
