package sameredis

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
)

// Config configures a Guard.
type Config struct {
	// Records and Presence are the two clients (Presence is written
	// through, Records read through).
	Records, Presence redis.UniversalClient
	// RecordsName and PresenceName name them in errors and logs (e.g.
	// "NodeConfig.Redis").
	RecordsName, PresenceName string
	// Keys are the keys whose slots the proof covers (each presence
	// shard's).
	Keys []string
	// Retry is how often a failed proof is tried again, and the bound of
	// each proof. default: 3s
	Retry  time.Duration
	Clock  clock.Clock  // default: clock.New()
	Logger *slog.Logger // default: slog.Default()
}

// Guard keeps the proof that two clients reach one dataset. Create it with
// New, call Check once, Close it when done. Safe for concurrent use.
type Guard struct {
	cfg Config

	// gen counts the servers either client connected to that it had not
	// connected to before; proven is the gen the last proof that stood
	// covered, failed the gen of a proof that failed since (0: none).
	gen, proven, failed atomic.Uint64

	mu      sync.Mutex
	seen    map[string]bool // "<client>|<remote address>"
	err     error           // the last proof's failure
	changed chan struct{}   // closed and replaced when proven or failed moves
	closed  bool

	wake   chan struct{} // buffered 1: a new server was connected to
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// probeKey marks the proof's own commands, which the gate lets through.
type probeKey struct{}

// New returns a Guard of cfg's two clients. It does no I/O.
func New(cfg Config) *Guard {
	if cfg.Retry <= 0 {
		cfg.Retry = 3 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Guard{cfg: cfg, seen: make(map[string]bool), changed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Check proves that the two clients reach one dataset, then keeps the proof:
// it watches every new connection of either client (a *redis.Client's; a
// Cluster learns its nodes from the cluster itself) and, on one to a server
// not connected to before, proves it again, in a goroutine of its own, while
// every command of the presence client waits for that proof (bounded by its
// context) and fails with the proof's error when it fails (then tried again
// every Retry). It returns the first proof's failure, bounded by ctx: a
// *MismatchError, or the call's error when it could not be made; the Guard
// keeps trying either way, its gate shut meanwhile (Close it to give up).
func (g *Guard) Check(ctx context.Context) error {
	if g.cfg.Records == g.cfg.Presence {
		return nil // one client: one dataset
	}
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"records", g.cfg.Records}, {"presence", g.cfg.Presence}} {
		if _, ok := c.rdb.(*redis.Client); ok {
			c.rdb.AddHook(dialWatch{g: g, client: c.name})
		}
	}
	want := g.gen.Add(1) // the first proof's own generation: nothing passes the gate before it
	err := g.prove(ctx)
	g.settle(want, err, false)
	g.cfg.Presence.AddHook(gate{g: g})
	lctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	g.wg.Add(1)
	go g.loop(lctx)
	return err
}

// Close stops the Guard's goroutine and waits for it. The hooks stay on
// the clients (go-redis cannot remove one) and let every command through.
func (g *Guard) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
}

// prove runs one proof, bounded by Retry.
func (g *Guard) prove(ctx context.Context) error {
	pctx, cancel := g.cfg.Clock.WithTimeout(context.WithValue(ctx, probeKey{}, true), g.cfg.Retry)
	defer cancel()
	err := Prove(pctx, g.cfg.Presence, g.cfg.Records, g.cfg.Keys)
	if err != nil {
		return fmt.Errorf("%s (%s) and %s (%s): %w", g.cfg.PresenceName, Describe(g.cfg.Presence), g.cfg.RecordsName,
			Describe(g.cfg.Records), err)
	}
	return nil
}

// loop proves again whenever a new server was connected to, and every
// Retry while a proof fails.
func (g *Guard) loop(ctx context.Context) {
	defer g.wg.Done()
	for {
		want := g.gen.Load()
		if want > g.proven.Load() {
			err := g.prove(ctx)
			if ctx.Err() != nil {
				return
			}
			g.settle(want, err, true)
			if err != nil {
				t := g.cfg.Clock.Timer(g.cfg.Retry)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				continue
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
		}
	}
}

// settle records the outcome of a proof of gen want, logs a change (when
// log), and wakes the commands waiting on it.
func (g *Guard) settle(want uint64, err error, log bool) {
	g.mu.Lock()
	wasFailing := g.failed.Load() != 0
	if err == nil {
		if want > g.proven.Load() {
			g.proven.Store(want)
		}
		g.failed.Store(0)
	} else {
		g.failed.Store(want)
		g.err = err
	}
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	switch {
	case !log:
	case err != nil && !wasFailing:
		g.cfg.Logger.Error("presence and records are not proven to be on one dataset (a client connected to another "+
			"server, or the proof failed): presence calls fail until they are, so this server's lease lapses and it "+
			"fences its sessions before any peer can read it stopped", "err", err)
	case err == nil && wasFailing:
		g.cfg.Logger.Info("presence and records are proven to be on one dataset again")
	}
}

// await waits until a proof covers gen (nil), a proof of gen or later
// failed (its error), or ctx ends.
func (g *Guard) await(ctx context.Context, gen uint64) error {
	for {
		if gen <= g.proven.Load() {
			return nil
		}
		g.mu.Lock()
		if f := g.failed.Load(); f >= gen && f != 0 {
			err := g.err
			g.mu.Unlock()
			return err
		}
		if g.closed {
			g.mu.Unlock()
			return nil
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the proof that presence and records are on one dataset: %w", ctx.Err())
		}
	}
}

// connected notes a connection of client to addr; a server not seen before
// moves gen and wakes the loop.
func (g *Guard) connected(client, addr string) {
	k := client + "|" + addr
	g.mu.Lock()
	if g.seen[k] {
		g.mu.Unlock()
		return
	}
	g.seen[k] = true
	g.gen.Add(1)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// dialWatch is the hook that notes each new connection of a client.
type dialWatch struct {
	g      *Guard
	client string
}

func (d dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			remote := addr
			if ra := conn.RemoteAddr(); ra != nil {
				remote = ra.String()
			}
			d.g.connected(d.client, remote)
		}
		return conn, err
	}
}

func (d dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gate is the hook on the presence client: a command waits for a proof
// that covers every server connected to before it started, and, when
// another was connected to while it ran (its own connection, perhaps),
// for one that covers that too; a failed proof fails it.
type gate struct{ g *Guard }

func (gt gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (gt gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return gt.around(ctx, func() error { return next(ctx, cmd) }, func(err error) { cmd.SetErr(err) })
	}
}

func (gt gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return gt.around(ctx, func() error { return next(ctx, cmds) }, func(err error) {
			for _, c := range cmds {
				c.SetErr(err)
			}
		})
	}
}

// around runs call under the gate; fail marks the command(s) failed.
func (gt gate) around(ctx context.Context, call func() error, fail func(error)) error {
	g := gt.g
	if ctx.Value(probeKey{}) != nil {
		return call()
	}
	before := g.gen.Load()
	if err := g.await(ctx, before); err != nil {
		fail(err)
		return err
	}
	err := call()
	if after := g.gen.Load(); after != before {
		if werr := g.await(ctx, after); werr != nil {
			fail(werr)
			return werr
		}
	}
	return err
}
