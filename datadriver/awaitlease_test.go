package datadriver_test

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

// fencedNode starts a Node whose presence beats fail (an injected error on
// every script call of its presence client) while the returned flag is set.
func fencedNode(t *testing.T, r *testsupport.Redis, job string, disableHandoff bool) (*datadriver.Node, *atomic.Bool) {
	t.Helper()
	var failing atomic.Bool
	failing.Store(true)
	prdb := r.Client(t).(*redis.Client)
	prdb.AddHook(testsupport.FailScriptsWhile(&failing))
	node, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{JobID: job, Redis: r.Client(t),
		PresenceRedis: prdb, Namespace: r.Namespace, Beat: 100 * time.Millisecond, PresenceTTL: time.Second,
		DisableHandoff: disableHandoff, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	return node, &failing
}

// A Node whose first beats are not acknowledged is fenced; AwaitLease
// returns on the beat that lands, and not before.
func TestAwaitLeaseReturnsOnTheBeatThatLands(t *testing.T) {
	node, failing := fencedNode(t, testsupport.StartRedis(t), "await-lands", false)
	if !errors.Is(node.Healthy(), datadriver.ErrFenced) {
		t.Fatalf("Healthy = %v with its beats failing, want ErrFenced", node.Healthy())
	}
	const failFor = 300 * time.Millisecond
	start := time.Now()
	time.AfterFunc(failFor, func() { failing.Store(false) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.AwaitLease(ctx); err != nil {
		t.Fatalf("AwaitLease = %v after the beats resumed, want nil", err)
	}
	if took := time.Since(start); took < failFor {
		t.Fatalf("AwaitLease returned after %s, before any beat could land (%s)", took, failFor)
	}
	if err := node.Healthy(); err != nil {
		t.Fatalf("after AwaitLease: Healthy = %v, want the lease held", err)
	}
	if err := node.AwaitLease(ctx); err != nil { // held: at once
		t.Fatalf("AwaitLease with the lease held = %v", err)
	}
}

// AwaitLease ends with its context, and with the Node's Close.
func TestAwaitLeaseEnds(t *testing.T) {
	r := testsupport.StartRedis(t)
	t.Run("context", func(t *testing.T) {
		node, _ := fencedNode(t, r, "await-ctx", false)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := node.AwaitLease(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AwaitLease = %v with no beat landing, want the context's deadline", err)
		}
	})
	t.Run("close", func(t *testing.T) {
		node, _ := fencedNode(t, r, "await-close", false)
		done := make(chan error, 1)
		go func() { done <- node.AwaitLease(context.Background()) }()
		time.Sleep(100 * time.Millisecond)
		_ = node.Close(context.Background()) // its presence removal fails as its beats do
		select {
		case err := <-done:
			if !errors.Is(err, datadriver.ErrClosing) {
				t.Fatalf("AwaitLease = %v after Close, want ErrClosing", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("AwaitLease still waiting 10 s after Close")
		}
	})
	t.Run("closed with its lease held", func(t *testing.T) {
		node, failing := fencedNode(t, r, "await-closed", false)
		failing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := node.AwaitLease(ctx); err != nil {
			t.Fatalf("AwaitLease = %v with the beats landing", err)
		}
		if err := node.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := node.AwaitLease(ctx); !errors.Is(err, datadriver.ErrClosing) {
			t.Fatalf("AwaitLease after Close = %v, want ErrClosing (a closed Node starts no session)", err)
		}
	})
	t.Run("handoff off", func(t *testing.T) {
		node, _ := fencedNode(t, r, "await-off", true)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := node.AwaitLease(ctx); err != nil {
			t.Fatalf("AwaitLease = %v on a Node with handoff off (no presence flag to wait for), want nil", err)
		}
	})
}
