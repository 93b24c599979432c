package main

// What the commands that act through the library (send, restore) share: a
// Node of their own, named after the command, and a driver that reads and
// writes profile data as the bytes stored, without knowing the game's type.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
)

// adminFlags are the flags of send and restore beyond the reader flags.
type adminFlags struct {
	natsURL        string
	subjectPrefix  string
	requestKeyFile string
}

// add adds --nats, --subject-prefix and --request-key-file.
func (f *adminFlags) add(c *command) {
	c.fs.StringVar(&f.natsURL, "nats", "", "")
	c.fs.StringVar(&f.subjectPrefix, "subject-prefix", messaging.DefaultPrefix, "")
	c.fs.StringVar(&f.requestKeyFile, "request-key-file", "", "")
}

// requestKey is the content of --request-key-file (the servers'
// NodeConfig.RequestKey, byte for byte), or nil without it.
func (f *adminFlags) requestKey() ([]byte, error) {
	if f.requestKeyFile == "" {
		return nil, nil
	}
	key, err := os.ReadFile(f.requestKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--request-key-file: %w", err)
	}
	if len(key) < messaging.MinKeyBytes {
		return nil, fmt.Errorf("--request-key-file: %s holds %d bytes, fewer than the %d of a request key",
			f.requestKeyFile, len(key), messaging.MinKeyBytes)
	}
	return key, nil
}

// check refuses a subject prefix no server can have.
func (f *adminFlags) check(c *command) error {
	if f.subjectPrefix == "" {
		return c.mistake("--subject-prefix is empty (the servers' NodeConfig.SubjectPrefix; default %s)", messaging.DefaultPrefix)
	}
	return nil
}

// natsServer is --nats, else NATS_URL, else "" (no NATS).
func (f *adminFlags) natsServer() string { return cmp.Or(f.natsURL, os.Getenv(envNATS)) }

// adminSpec says how an admin Node is made.
type adminSpec struct {
	command string // names the JobID: "playerdata-<command>-<8 hex>"
	driver  string // the driver's Config.Name
	// handoff turns the Node's presence beat and bus on: a Node that takes
	// a lock (restore), or sends notifications over NATS (send), needs it.
	handoff bool
	natsURL string // "" for none
	// cfg is the driver's configuration; its Name is set from driver.
	cfg datadriver.Config[msgpack.RawMessage]
}

// adminNode is a Node of the CLI and one driver of T = msgpack.RawMessage:
// the codec reads a record's data as the one msgpack value it holds and
// writes those very bytes back, so nothing of the game's data is decoded,
// defaulted or lost.
type adminNode struct {
	node *datadriver.Node
	nc   *nats.Conn // nil without NATS
	drv  *datadriver.Driver[msgpack.RawMessage]
}

// openAdmin starts the Node of spec on the reader's Redis, with the
// namespace, presence hash and presence TTL the servers use (rf), so that
// servers read its presence as they read each other's. Warnings of the
// library go to stderr. The caller closes it.
func openAdmin(ctx context.Context, r *reader, rf *readFlags, af *adminFlags, spec adminSpec, stderr io.Writer) (*adminNode, error) {
	job, err := adminJob(spec.command)
	if err != nil {
		return nil, err
	}
	key, err := af.requestKey()
	if err != nil {
		return nil, err
	}
	a := &adminNode{}
	if spec.natsURL != "" && spec.handoff {
		nc, err := connectNATS(spec.natsURL, job)
		if err != nil {
			return nil, err
		}
		a.nc = nc
	}
	ttl := rf.presenceTTL
	cfg := datadriver.NodeConfig{
		JobID: job, Redis: r.rdb, NATS: a.nc, Namespace: r.ns, DisableHandoff: !spec.handoff,
		Logger:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		PresenceKey: rf.presenceKey, PresenceShards: r.layout.Shards, SubjectPrefix: af.subjectPrefix,
		// The servers' ratio of beat to TTL (3 s to 10 s by default).
		PresenceTTL: ttl, Beat: defaultBeatOf(ttl),
	}
	if a.nc != nil {
		cfg.RequestKey = key // it signs what goes over NATS
	}
	node, err := datadriver.NewNode(ctx, cfg)
	if err != nil {
		a.closeNATS()
		return nil, err
	}
	a.node = node
	if spec.handoff {
		awaitLease(ctx, node, ttl)
	}
	spec.cfg.Name = spec.driver
	if a.drv, err = datadriver.NewDriver(node, spec.cfg); err != nil {
		_ = a.close()
		return nil, err
	}
	return a, nil
}

// close closes the Node (releasing what it holds, waiting for the
// notifications it sent to reach the NATS client), then flushes NATS so
// they reach the server, within closeTimeout.
func (a *adminNode) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := a.node.Close(ctx)
	if a.nc != nil {
		if ferr := a.nc.FlushWithContext(ctx); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
			err = errors.Join(err, fmt.Errorf("flush NATS: %w", ferr))
		}
	}
	a.closeNATS()
	return err
}

// closeNATS closes the NATS connection, if any.
func (a *adminNode) closeNATS() {
	if a.nc != nil {
		a.nc.Close()
	}
}

// asIs returns n migrations that change nothing, all backward compatible:
// a driver with them claims schema version n, so that it loads a record
// written at version n (a record's min-reader is never above its version)
// without running anything over its data, and writes it back stamped with
// the record's own version and min-reader (WriteVersion keeps the larger).
// The CLI knows none of the game's migrations: data of another schema
// version than the record's must be refused before it reaches such a
// driver, since a real migration would have changed it.
func asIs(n int) []datadriver.Migration {
	ms := make([]datadriver.Migration, n)
	for i := range ms {
		ms[i] = datadriver.Migration{Apply: func(map[string]any) error { return nil }, BackwardCompatible: true}
	}
	return ms
}

// awaitLease waits until node holds its presence lease (its first beat
// acknowledged), for at most ttl: a Node whose first beat was slow (a
// loaded Redis or machine) starts no session until a later beat lands, and
// a one-shot command would fail for it. The beat loop tries every beat,
// three times in a TTL; past that (or once ctx ends) the verb goes on and
// its load says why the Node cannot start a session.
func awaitLease(ctx context.Context, node *datadriver.Node, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	_ = node.AwaitLease(ctx) // its error is the load's to say
}
