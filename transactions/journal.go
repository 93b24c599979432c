package transactions

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/tradejournal"
)

// State is a trade's state in the journal.
type State string

// The states of a trade.
const (
	Prepared  State = "PREPARED"
	Committed State = "COMMITTED"
	Aborted   State = "ABORTED"
)

// DefaultRetain is how long a settled or aborted entry is kept (TradeRetain).
const DefaultRetain = tradejournal.DefaultRetain

// Errors of Read, wrapped with the trade id: match them with errors.Is.
var (
	ErrNotFound = tradejournal.ErrNotFound // no entry (never written, or expired)
	ErrCorrupt  = tradejournal.ErrCorrupt  // undecodable, or fails its checksum
)

// Participant is one profile in a trade, as prepared.
type Participant struct {
	Driver    string
	Key       string
	Token     string // the coordinator's lock token at prepare
	Ver       int64  // the record version at prepare
	Image     []byte // the post-trade data
	Schema    int    // the image's schema version
	SchemaMin int    // the lowest schema version that may read the image
}

// Entry is a trade's journal entry.
type Entry struct {
	ID           string
	State        State
	Coordinator  string    // the JobID of the server that made the trade
	At           time.Time // when it was opened (Redis clock); zero for a tombstone
	Participants []Participant
	Settled      []bool // per participant: its image is in its record
}

// Journal reads the trade entries of one namespace.
type Journal struct {
	j *tradejournal.Journal
}

// New returns the journal of namespace ns (datadriver's Namespace).
func New(rdb redis.UniversalClient, ns string) *Journal {
	return &Journal{j: tradejournal.New(rdb, ns, 0)}
}

// Key is the Redis key of trade id: "<ns>:trade:{<id>}".
func (j *Journal) Key(id string) string { return j.j.Key(id) }

// Read returns trade id's entry, ErrNotFound when there is none, or
// ErrCorrupt when it cannot be decoded or does not match its checksum.
func (j *Journal) Read(ctx context.Context, id string) (*Entry, error) {
	e, err := j.j.Read(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Entry{ID: e.ID, State: State(e.State), Coordinator: e.Coordinator, At: e.At, Settled: e.Settled}
	for _, p := range e.Participants {
		out.Participants = append(out.Participants, Participant(p))
	}
	return out, nil
}
