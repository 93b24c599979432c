package tradejournal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/checksum"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/tradescript"
)

// State is a trade's state in the journal.
type State string

// The states of a trade.
const (
	Prepared  State = "PREPARED"
	Committed State = "COMMITTED"
	Aborted   State = "ABORTED"
)

// DefaultRetain is how long a settled entry is kept: long enough for an
// operator to look at a trade a player reports.
const DefaultRetain = 24 * time.Hour

// Participant is one profile in a trade.
type Participant struct {
	Driver string
	Key    string
	Token  string // the coordinator's lock token at prepare
	Ver    int64  // the record version at prepare
	Image  []byte // the post-trade data
	// Schema and SchemaMin are the image's schema version and the lowest
	// that may read it, written with it.
	Schema    int
	SchemaMin int
}

// Entry is a journal entry as read.
type Entry struct {
	ID           string
	State        State
	Coordinator  string
	At           time.Time // when it was opened (Redis clock); zero for a tombstone
	Participants []Participant
	Settled      []bool // per participant: its image is in its record
}

// Find returns the index of the participant driver/key, or -1.
func (e *Entry) Find(driver, key string) int {
	for i, p := range e.Participants {
		if p.Driver == driver && p.Key == key {
			return i
		}
	}
	return -1
}

// Journal reads and moves trade entries in one Redis.
type Journal struct {
	rdb    redis.UniversalClient
	ns     string
	retain time.Duration
}

// New returns the journal under namespace ns. retain is how long a settled
// entry is kept (0: DefaultRetain).
func New(rdb redis.UniversalClient, ns string, retain time.Duration) *Journal {
	if retain <= 0 {
		retain = DefaultRetain
	}
	return &Journal{
		rdb: rdb, ns: ns, retain: retain,
	}
}

// Key is the Redis key of trade id: "<ns>:trade:{<id>}".
func (j *Journal) Key(id string) string {
	k := "trade:{" + id + "}"
	if j.ns == "" {
		return k
	}
	return j.ns + ":" + k
}

// Retain is how long a settled entry is kept (and a PREPARED one that
// never commits).
func (j *Journal) Retain() time.Duration { return j.retain }

// Begin opens trade id as PREPARED, coordinated by coordinator: nil, or a
// *StateError when the id has an entry already (a participant's recovery
// aborted it). A PREPARED entry that never commits expires after Retain.
// (A trade's coordinator opens it in the same round trip as the
// participants' marks; Begin is the same script alone.)
func (j *Journal) Begin(ctx context.Context, id, coordinator string, parts []Participant) error {
	a := tradescript.BeginArgs{Coordinator: coordinator, Retain: j.retain, Parts: make([]tradescript.Part, len(parts))}
	for i, p := range parts {
		a.Parts[i] = tradescript.Part{Desc: tradescript.Desc{Driver: p.Driver, Key: p.Key, Token: p.Token, Ver: p.Ver,
			Schema: p.Schema, SchemaMin: p.SchemaMin}, Image: p.Image}
	}
	r, err := tradescript.Begin().Run(ctx, j.rdb, j.Key(id), a)
	switch {
	case err != nil:
		return fmt.Errorf("trade %s: begin: %w", id, err)
	case !r.Done:
		return &StateError{ID: id, State: State(r.State)}
	}
	return nil
}

// Commit moves trade id PREPARED -> COMMITTED: the commit point. Another
// state answers a *StateError (ABORTED: a recovery gave the trade up).
func (j *Journal) Commit(ctx context.Context, id string) error {
	return j.cas(ctx, id, Prepared, Committed)
}

// Abort moves trade id PREPARED -> ABORTED, or creates an ABORTED tombstone
// when it has no entry. A COMMITTED trade answers a *StateError and stays
// committed; an ABORTED one answers nil.
func (j *Journal) Abort(ctx context.Context, id string) error {
	err := j.cas(ctx, id, Prepared, Aborted)
	var se *StateError
	if errors.As(err, &se) {
		switch se.State {
		case Aborted:
			return nil
		case "":
			err = j.cas(ctx, id, "", Aborted)
			if errors.As(err, &se) && se.State == Aborted {
				return nil
			}
		}
	}
	return err
}

// CommitWait is Commit, then WAIT for replicas replicas to acknowledge it on
// the same connection, within timeout (one pipeline). It returns how many
// did; the commit stands either way.
func (j *Journal) CommitWait(ctx context.Context, id string, replicas int, timeout time.Duration) (int64, error) {
	c := j.moveCall(id, Prepared, Committed)
	v, acked, err := rscript.RunWait(ctx, j.rdb, c.Call, replicas, timeout)
	r, err := c.Answer(v, err)
	return acked, moved(id, Prepared, Committed, r, err)
}

// moveCall is the compare-and-set of trade id from one state to another.
func (j *Journal) moveCall(id string, from, to State) rscript.Pending[tradescript.Result] {
	return tradescript.Move().Call(j.Key(id), tradescript.MoveArgs{From: string(from), To: string(to), Retain: j.retain})
}

func (j *Journal) cas(ctx context.Context, id string, from, to State) error {
	r, err := tradescript.Move().Run(ctx, j.rdb, j.Key(id), tradescript.MoveArgs{From: string(from), To: string(to), Retain: j.retain})
	return moved(id, from, to, r, err)
}

// moved reads the compare-and-set's answer.
func moved(id string, from, to State, r tradescript.Result, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("trade %s: %s -> %s: %w", id, from, to, err)
	case !r.Done:
		return &StateError{ID: id, State: State(r.State)}
	}
	return nil
}

// MarkSettled records that participants idx of a committed trade have their
// image in their record; once all have, the entry expires after Retain.
func (j *Journal) MarkSettled(ctx context.Context, id string, idx ...int) error {
	r, err := tradescript.Settled().Run(ctx, j.rdb, j.Key(id), tradescript.SettledArgs{Retain: j.retain, Idx: idx})
	if err != nil {
		return fmt.Errorf("trade %s: mark settled: %w", id, err)
	}
	if !r.Done {
		return &StateError{ID: id, State: State(r.State)}
	}
	return nil
}

// Read returns trade id's entry, ErrNotFound when there is none, or
// ErrCorrupt when it cannot be decoded or does not match its checksum.
func (j *Journal) Read(ctx context.Context, id string) (*Entry, error) {
	m, err := j.rdb.HGetAll(ctx, j.Key(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("trade %s: read: %w", id, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("trade %s: %w", id, ErrNotFound)
	}
	return parseEntry(id, m)
}

// parseEntry reads trade id's entry from its fields, checking every one:
// the state and the settled marks by their form, the rest by the entry's
// checksum (c: written by this build's begin; an entry an earlier build
// began has none and is read unchecked).
func parseEntry(id string, m map[string]string) (*Entry, error) {
	e := &Entry{ID: id, State: State(m["state"]), Coordinator: m["coord"]}
	switch e.State {
	case Prepared, Committed, Aborted:
	default:
		return nil, fmt.Errorf("trade %s: %w: state %q", id, ErrCorrupt, m["state"])
	}
	if at, err := strconv.ParseInt(m["at"], 10, 64); err == nil {
		e.At = time.UnixMilli(at)
	}
	n, err := strconv.Atoi(m["n"])
	if m["n"] == "" && e.State == Aborted {
		return e, nil // a tombstone (an aborted entry's participants matter to nobody)
	}
	if err != nil || n < 0 || n > 1000 {
		return nil, fmt.Errorf("trade %s: %w: participant count %q", id, ErrCorrupt, m["n"])
	}
	for i := range n {
		desc, ok := m["p"+strconv.Itoa(i)]
		d, err := tradescript.DecodeDesc([]byte(desc))
		if !ok || err != nil {
			return nil, fmt.Errorf("trade %s: %w: participant %d", id, ErrCorrupt, i)
		}
		p := Participant{Driver: d.Driver, Key: d.Key, Token: d.Token, Ver: d.Ver, Schema: d.Schema, SchemaMin: d.SchemaMin}
		img, ok := m["img"+strconv.Itoa(i)]
		if !ok {
			return nil, fmt.Errorf("trade %s: %w: image %d missing", id, ErrCorrupt, i)
		}
		p.Image = []byte(img)
		e.Participants = append(e.Participants, p)
		mark, settled := m["s"+strconv.Itoa(i)]
		if settled && mark != "1" {
			return nil, fmt.Errorf("trade %s: %w: settled mark %d is %q", id, ErrCorrupt, i, mark)
		}
		e.Settled = append(e.Settled, settled)
	}
	if err := checkEntry(m, n); err != nil {
		return nil, fmt.Errorf("trade %s: %w: %w", id, ErrCorrupt, err)
	}
	return e, nil
}

// checkEntry checks an entry of n participants against its checksum c
// ("<crc>,<at>"): the coordinator, the count, every descriptor and image,
// and the time it copies.
func checkEntry(m map[string]string, n int) error {
	c, ok := m["c"]
	if !ok {
		return nil // begun by an earlier build
	}
	sum, at, found := strings.Cut(c, ",")
	if !found || !checksum.Valid(sum) {
		return fmt.Errorf("its checksum %q is not <crc>,<at>", c)
	}
	if at != m["at"] {
		return fmt.Errorf("its time %q disagrees with its checksum, which says %q", m["at"], at)
	}
	parts := [][]byte{[]byte(m["coord"]), []byte(m["n"])}
	for i := range n {
		parts = append(parts, []byte(m["p"+strconv.Itoa(i)]), []byte(m["img"+strconv.Itoa(i)]))
	}
	if checksum.Of(parts...) != sum {
		return errors.New("its coordinator, participants or images do not match its checksum (c): damaged")
	}
	return nil
}
