package datadriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Shutdown and health. Kubernetes gives a pod 30 s between SIGTERM and
// SIGKILL (terminationGracePeriodSeconds), and game hosts (Agones'
// Shutdown, Roblox's BindToClose) much the same: Close saves and releases
// every profile in parallel within the context's deadline.

// Closing is closed when Close begins. A game watching it stops
// matchmaking players in; the players it has are kicked with
// ReasonShutdown (send them to another server), their profiles saved and
// released.
func (n *Node) Closing() <-chan struct{} { return n.closing }

// Healthy is nil while the Node can start sessions and hand them over, and
// otherwise says why not: ErrClosing (Close began), an error matching
// ErrFenced (no presence lease: its beats are not acknowledged, so Redis
// cannot be reached or is failing), one matching ErrEvictionPolicy (Redis
// was set, since NewNode, to a maxmemory-policy that may evict records,
// and AcceptEviction is not set: read every minute), or one matching
// ErrBusDown (its NATS connection is down: its players cannot be handed
// over, and joins elsewhere wait for their presence to expire). Use it for a readiness
// probe (send players only while it is nil), not for liveness: a Node
// recovers from each of these by itself.
func (n *Node) Healthy() error {
	select {
	case <-n.closing:
		return ErrClosing
	default:
	}
	if n.handoffOn && !n.presence.Lease().ValidAt(n.clock.Now()) {
		return fmt.Errorf("%w: no presence lease (its beats are not acknowledged)", ErrFenced)
	}
	if err := n.memoryErr(); err != nil {
		return err
	}
	if nc := n.cfg.NATS; nc != nil && n.handoffOn && !nc.IsConnected() {
		return fmt.Errorf("%w: NATS connection %s", ErrBusDown, strings.ToLower(nc.Status().String()))
	}
	return nil
}

// Ready reports whether Healthy is nil.
func (n *Node) Ready() bool { return n.Healthy() == nil }

// Close shuts the server down: Closing closes at once, Joins and Loads
// answer ErrClosing from then on, every live session is kicked with
// ReasonShutdown, and every profile is saved and released, all in
// parallel, bounded by ctx (give it the platform's grace period less a
// margin). A profile that could not be released in time is logged by key
// and keeps its lock in Redis until this server's presence expires (its
// players wait that long, about PresenceTTL, to join elsewhere) or the lock
// ages out. Then every goroutine the Node started stops. Close returns the
// releases' errors joined; later calls return nil.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.closing)
	drivers := n.driversLocked()
	n.mu.Unlock()
	start := n.clock.Now()

	var wg sync.WaitGroup
	errs := make([]error, len(drivers))
	for i, d := range drivers {
		wg.Go(func() { errs[i] = d.shutdown(ctx) })
	}
	wg.Wait()
	clean := errors.Join(errs...) == nil
	// No background write starts now (markSettled checks closed): wait for
	// those under way.
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.cancel()
		<-done
	}
	// Stop beating only now: a server still releasing must not look stopped.
	if err := n.handoff.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := n.presence.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if clean {
		if err := n.presence.Remove(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove presence: %w", err))
		}
	}
	n.unregBus()
	n.unregRedis()
	if n.closePresenceRedis != nil {
		_ = n.closePresenceRedis()
	}
	n.cancel()
	n.watchers.Wait()
	err := errors.Join(errs...)
	if err != nil {
		n.log.Error("node closed; some profiles could not be released", "took", n.clock.Since(start), "err", err)
	} else {
		n.log.Info("node closed; every profile saved and released", "took", n.clock.Since(start))
	}
	return err
}
