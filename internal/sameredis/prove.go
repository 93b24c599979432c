// Package sameredis proves that two Redis clients reach one dataset: the
// client a Node writes its presence beats through and the one that holds
// its records. A beat written where the records are not is a beat no peer
// reads: the peers would prove a live server stopped and take its locks.
//
// The proof is what the two clients do, not what their options say: a
// fresh value written through one under a key in each slot that matters
// (each presence shard's) must read back through the other. Another
// redis-server, another DB number of the same one (a different dataset),
// another Cluster, a Sentinel client following another primary: each
// fails it. A Guard proves it once at start, and again whenever either
// client connects to a server it had not connected to before (a Sentinel
// failover, a changed DNS answer); until a proof stands again, every
// command of the presence client waits for it, and fails when it fails.
package sameredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeTTL bounds how long a probe value can outlive a proof that did not
// delete it (its process died mid-proof).
const probeTTL = time.Minute

// MismatchError says that the two clients do not reach one dataset.
type MismatchError struct {
	// Writer and Reader describe the clients (Describe).
	Writer, Reader string
	// Key is the probe key whose value did not read back.
	Key string
	// Got is what the reader found instead ("" for nothing).
	Got string
}

func (e *MismatchError) Error() string {
	found := "nothing"
	if e.Got != "" {
		found = fmt.Sprintf("%q", e.Got)
	}
	return fmt.Sprintf("a value written through %s under %s read back as %s through %s: they do not reach one dataset",
		e.Writer, e.Key, found, e.Reader)
}

// Describe names a client for an error: its type and address, and DB
// number where it has one.
func Describe(c redis.UniversalClient) string {
	switch x := c.(type) {
	case *redis.Client:
		o := x.Options()
		if o.Addr == "FailoverClient" {
			return fmt.Sprintf("a Sentinel failover client (db %d)", o.DB)
		}
		return fmt.Sprintf("redis %s db %d", o.Addr, o.DB)
	case *redis.ClusterClient:
		return "a Redis Cluster client of " + strings.Join(x.Options().Addrs, ",")
	}
	return fmt.Sprintf("a %T", c)
}

// ProbeKey is the key a proof writes in the slot of key: a suffix of key
// that keeps its Redis Cluster hash tag (or, for a key without one, takes
// the whole key as its tag, which Redis hashes alike), so it lives where
// key lives and under the same prefix (an ACL that allows key's prefix
// allows it).
func ProbeKey(key, nonce string) string {
	open := strings.IndexByte(key, '{')
	if open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			return key + ":probe:" + nonce
		}
	}
	return key + ":{" + key + "}:probe:" + nonce
}

// Prove writes a fresh value through w under ProbeKey of each of keys and
// reads it back through r, in one pipeline each way, then deletes the
// probes: nil when every one reads back, a *MismatchError when one does
// not, the call's error when a call fails.
func Prove(ctx context.Context, w, r redis.UniversalClient, keys []string) error {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("sameredis: nonce: %w", err)
	}
	nonce := hex.EncodeToString(b[:])
	probes := make([]string, len(keys))
	for i, k := range keys {
		probes[i] = ProbeKey(k, nonce)
	}
	if _, err := w.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range probes {
			p.Set(ctx, k, nonce, probeTTL)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("write the probe through %s: %w", Describe(w), err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		for _, k := range probes {
			w.Del(dctx, k) // best effort: each expires anyway
		}
	}()
	gets := make([]*redis.StringCmd, len(probes))
	if _, err := r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range probes {
			gets[i] = p.Get(ctx, k)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the probe through %s: %w", Describe(r), err)
	}
	for i, g := range gets {
		if v := g.Val(); v != nonce {
			return &MismatchError{Writer: Describe(w), Reader: Describe(r), Key: probes[i], Got: v}
		}
	}
	return nil
}
