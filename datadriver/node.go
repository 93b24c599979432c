package datadriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
)

// Node is one game-server process: its JobID, its Redis client, its clock
// and logger, and every driver it runs. Close it on shutdown: it saves and
// releases every profile it holds and stops every goroutine it started.
type Node struct {
	jobID   string
	rdb     redis.UniversalClient
	ns      string
	clock   clock.Clock
	log     *slog.Logger
	scripts *scripts
	cfg     NodeConfig

	saveSem chan struct{} // bounds concurrent autosaves

	ctx    context.Context // cancelled by Close: stops background work
	cancel context.CancelFunc

	entropyMu sync.Mutex

	mu      sync.Mutex
	drivers map[string]driverHandle
	closed  bool
}

// driverHandle is what a Node needs of its drivers, whatever their T.
type driverHandle interface {
	// shutdown releases every profile of the driver and waits for its
	// goroutines.
	shutdown(ctx context.Context) error
}

// NewNode creates a Node. ctx bounds the start-up work only.
func NewNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if cfg.Redis == nil {
		return nil, fmt.Errorf("%w: Redis is required", ErrInvalidConfig)
	}
	if cfg.SaveTimeout < 0 || cfg.MaxConcurrentSaves < 0 {
		return nil, fmt.Errorf("%w: SaveTimeout and MaxConcurrentSaves must not be negative", ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SaveTimeout == 0 {
		cfg.SaveTimeout = DefaultSaveTimeout
	}
	if cfg.MaxConcurrentSaves == 0 {
		cfg.MaxConcurrentSaves = DefaultMaxConcurrentSaves
	}
	if cfg.Entropy == nil {
		cfg.Entropy = rand.Reader
	}
	n := &Node{
		rdb:     cfg.Redis,
		ns:      cfg.Namespace,
		clock:   cfg.Clock,
		scripts: newScripts(),
		cfg:     cfg,
		saveSem: make(chan struct{}, cfg.MaxConcurrentSaves),
		drivers: make(map[string]driverHandle),
	}
	n.jobID = cfg.JobID
	if n.jobID == "" {
		id, err := n.randomHex(8)
		if err != nil {
			return nil, err
		}
		n.jobID = "anon-" + id
	}
	n.log = cfg.Logger.With("job", n.jobID)
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return n, nil
}

// JobID is the name of this server in lock records.
func (n *Node) JobID() string { return n.jobID }

// Close saves and releases every profile the Node holds (running their
// leave cleanups), then stops every goroutine it started. ctx bounds the
// releases; a profile whose release fails keeps its lock in Redis until its
// presence expires or the lock ages out. Close returns the releases' errors
// joined; later calls return nil.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	drivers := make([]driverHandle, 0, len(n.drivers))
	for _, d := range n.drivers {
		drivers = append(drivers, d)
	}
	n.mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, len(drivers))
	for i, d := range drivers {
		wg.Go(func() { errs[i] = d.shutdown(ctx) })
	}
	wg.Wait()
	n.cancel()
	return errors.Join(errs...)
}

// register adds a driver under name.
func (n *Node) register(name string, d driverHandle) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if _, ok := n.drivers[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateDriver, name)
	}
	n.drivers[name] = d
	return nil
}

// randomHex returns n random bytes from the Node's entropy, hex encoded.
func (n *Node) randomHex(size int) (string, error) {
	b := make([]byte, size)
	n.entropyMu.Lock()
	_, err := io.ReadFull(n.cfg.Entropy, b)
	n.entropyMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("read entropy: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// newToken returns a fresh lock token.
func (n *Node) newToken() (string, error) { return n.randomHex(16) }

// acquireSave takes an autosave slot; it fails only when ctx ends.
func (n *Node) acquireSave(ctx context.Context) error {
	select {
	case n.saveSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) releaseSave() { <-n.saveSem }
