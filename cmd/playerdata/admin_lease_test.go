package main

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// An admin Node whose first presence beats are not acknowledged (a loaded
// Redis or machine) waits for a later one before its verb starts a session,
// for at most a presence TTL; past it, the verb goes on and says why.
func TestAwaitLeaseWaitsForALaterBeat(t *testing.T) {
	r := testsupport.StartRedis(t)
	for _, tc := range []struct {
		name      string
		failFor   time.Duration // the beats fail this long; -1: always
		wantLease bool
	}{
		{"a later beat lands", 300 * time.Millisecond, true},
		{"no beat lands within the TTL", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failing atomic.Bool
			failing.Store(true)
			prdb := r.Client(t).(*redis.Client)
			prdb.AddHook(testsupport.FailScriptsWhile(&failing))
			const beat, ttl = 100 * time.Millisecond, time.Second
			node, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{JobID: "admin-" + tc.name[:1],
				Redis: r.Client(t), PresenceRedis: prdb, Namespace: r.Namespace, Beat: beat, PresenceTTL: ttl,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = node.Close(context.Background()) })
			if !errors.Is(node.Healthy(), datadriver.ErrFenced) {
				t.Fatalf("Healthy = %v with its beats failing, want ErrFenced", node.Healthy())
			}
			if tc.failFor > 0 {
				time.AfterFunc(tc.failFor, func() { failing.Store(false) })
			}
			start := time.Now()
			awaitLease(context.Background(), node, ttl)
			took := time.Since(start)
			err = node.Healthy()
			switch {
			case tc.wantLease && err != nil:
				t.Fatalf("after awaitLease (%s): Healthy = %v, want the lease held", took, err)
			case !tc.wantLease && (!errors.Is(err, datadriver.ErrFenced) || took < ttl):
				t.Fatalf("awaitLease returned after %s with Healthy = %v; want ErrFenced after the TTL (%s)", took, err, ttl)
			}
		})
	}
}
