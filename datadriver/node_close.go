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

// Closing is closed when Close begins: a game watching it stops sending
// players here (those it has are kicked with ReasonShutdown).
func (n *Node) Closing() <-chan struct{} { return n.closing }

// Healthy is nil while the Node can start sessions and hand them over, and
// otherwise says why not: ErrClosing, ErrFenced (no presence lease),
// ErrEvictionPolicy (Redis was set to a policy that evicts records), or
// ErrBusDown. Use it for a readiness probe: a Node recovers by itself.
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

// Close shuts the server down within ctx: new loads answer ErrClosing, every
// live session is kicked (ReasonShutdown), saved and released in parallel;
// a profile that could not be keeps its lock until this server's presence
// expires. It returns the releases' errors.
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
	if n.batcher != nil {
		// Pipelines in flight end with their calls, by their deadlines at
		// the latest.
		if err := n.batcher.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("wait for pipelined calls: %w", err))
		}
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
	n.dataset.Close()
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
