package transactions

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/rscript"
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

var (
	//go:embed lua/begin.lua
	beginSrc string
	//go:embed lua/move.lua
	moveSrc string
	//go:embed lua/settled.lua
	settledSrc string
)

// The names of the journal's scripts, as an rscript.Catalog reports them.
const (
	ScriptBegin   = "trade-begin"
	ScriptMove    = "trade-move"
	ScriptSettled = "trade-settled"
)

// The scripts are immutable values shared by every client.
var (
	beginScript   = rscript.New(ScriptBegin, beginSrc)
	moveScript    = rscript.New(ScriptMove, moveSrc)
	settledScript = rscript.New(ScriptSettled, settledSrc)
)

// Scripts lists the journal's scripts (for an rscript.Catalog).
func Scripts() []*rscript.Script { return []*rscript.Script{beginScript, moveScript, settledScript} }

// Participant is one profile in a trade.
type Participant struct {
	Driver string `msgpack:"d"`
	Key    string `msgpack:"k"`
	Token  string `msgpack:"l"` // the coordinator's lock token at prepare
	Ver    int64  `msgpack:"v"` // the record version at prepare
	Image  []byte `msgpack:"-"` // the post-trade data (stored in its own field)
	// Schema and SchemaMin are the image's schema version and the lowest
	// that may read it, written with it.
	Schema    int `msgpack:"s,omitempty"`
	SchemaMin int `msgpack:"m,omitempty"`
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

// BeginCall is the call that opens trade id as PREPARED, for a pipeline with
// the participants' prepare marks (see Begun for its answer).
func (j *Journal) BeginCall(id, coordinator string, parts []Participant) (rscript.Call, error) {
	args := []any{coordinator, len(parts), j.retain.Milliseconds()}
	for _, p := range parts {
		desc, err := msgpack.Marshal(&p)
		if err != nil {
			return rscript.Call{}, fmt.Errorf("trade %s: encode participant: %w", id, err)
		}
		args = append(args, desc, p.Image)
	}
	return rscript.Call{Script: beginScript, Keys: []string{j.Key(id)}, Args: args}, nil
}

// Begun interprets BeginCall's answer: nil when the entry was opened, a
// *StateError when one existed already.
func Begun(id string, v any, err error) error {
	if err != nil {
		return fmt.Errorf("trade %s: begin: %w", id, err)
	}
	arr, _ := v.([]any)
	if len(arr) > 0 && arr[0] == "OK" {
		return nil
	}
	if len(arr) > 1 && arr[0] == "EXISTS" {
		s, _ := arr[1].(string)
		return &StateError{ID: id, State: State(s)}
	}
	return fmt.Errorf("trade %s: begin: unexpected answer %v", id, v)
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

// MoveArgs are the arguments of the compare-and-set script (trade-move):
// From is the expected state ("" for no entry), To the new one.
type MoveArgs struct {
	From, To State
	Retain   time.Duration
}

// argv is ARGV of move.lua.
func (a MoveArgs) argv() []any { return []any{string(a.From), string(a.To), a.Retain.Milliseconds()} }

// ParseMoveArgs reads the ARGV of an observed trade-move call (a commit is
// From Prepared, To Committed).
func ParseMoveArgs(argv []string) (MoveArgs, error) {
	if len(argv) != 3 {
		return MoveArgs{}, fmt.Errorf("transactions: %s call with %d arguments, want 3", ScriptMove, len(argv))
	}
	ms, err := strconv.ParseInt(argv[2], 10, 64)
	if err != nil {
		return MoveArgs{}, fmt.Errorf("transactions: %s retention %q: %w", ScriptMove, argv[2], err)
	}
	return MoveArgs{From: State(argv[0]), To: State(argv[1]), Retain: time.Duration(ms) * time.Millisecond}, nil
}

// CommitWait is Commit, then WAIT for replicas replicas to acknowledge it on
// the same connection, within timeout (one pipeline). It returns how many
// did; the commit stands either way.
func (j *Journal) CommitWait(ctx context.Context, id string, replicas int, timeout time.Duration) (int64, error) {
	v, acked, err := rscript.RunWait(ctx, j.rdb, j.moveCall(id, Prepared, Committed), replicas, timeout)
	return acked, moved(id, Prepared, Committed, v, err)
}

// moveCall is the compare-and-set of trade id from one state to another.
func (j *Journal) moveCall(id string, from, to State) rscript.Call {
	return rscript.Call{Script: moveScript, Keys: []string{j.Key(id)}, Args: MoveArgs{From: from, To: to, Retain: j.retain}.argv()}
}

func (j *Journal) cas(ctx context.Context, id string, from, to State) error {
	c := j.moveCall(id, from, to)
	v, err := c.Script.Run(ctx, j.rdb, c.Keys, c.Args...).Result()
	return moved(id, from, to, v, err)
}

// moved reads the compare-and-set's answer.
func moved(id string, from, to State, v any, err error) error {
	if err != nil {
		return fmt.Errorf("trade %s: %s -> %s: %w", id, from, to, err)
	}
	arr, _ := v.([]any)
	switch {
	case len(arr) > 0 && arr[0] == "OK":
		return nil
	case len(arr) > 1 && arr[0] == "STATE":
		s, _ := arr[1].(string)
		return &StateError{ID: id, State: State(s)}
	}
	return fmt.Errorf("trade %s: %s -> %s: unexpected answer %v", id, from, to, v)
}

// MarkSettled records that participants idx of a committed trade have their
// image in their record; once all have, the entry expires after Retain.
func (j *Journal) MarkSettled(ctx context.Context, id string, idx ...int) error {
	args := []any{j.retain.Milliseconds()}
	for _, i := range idx {
		args = append(args, i)
	}
	v, err := settledScript.Run(ctx, j.rdb, []string{j.Key(id)}, args...).Result()
	if err != nil {
		return fmt.Errorf("trade %s: mark settled: %w", id, err)
	}
	arr, _ := v.([]any)
	if len(arr) > 1 && arr[0] == "STATE" {
		s, _ := arr[1].(string)
		return &StateError{ID: id, State: State(s)}
	}
	return nil
}

// Read returns trade id's entry, ErrNotFound when there is none, or
// ErrCorrupt when it cannot be decoded.
func (j *Journal) Read(ctx context.Context, id string) (*Entry, error) {
	m, err := j.rdb.HGetAll(ctx, j.Key(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("trade %s: read: %w", id, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("trade %s: %w", id, ErrNotFound)
	}
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
		return e, nil // a tombstone
	}
	if err != nil || n < 0 || n > 1000 {
		return nil, fmt.Errorf("trade %s: %w: participant count %q", id, ErrCorrupt, m["n"])
	}
	for i := range n {
		var p Participant
		desc, ok := m["p"+strconv.Itoa(i)]
		if !ok || msgpack.Unmarshal([]byte(desc), &p) != nil {
			return nil, fmt.Errorf("trade %s: %w: participant %d", id, ErrCorrupt, i)
		}
		img, ok := m["img"+strconv.Itoa(i)]
		if !ok {
			return nil, fmt.Errorf("trade %s: %w: image %d missing", id, ErrCorrupt, i)
		}
		p.Image = []byte(img)
		e.Participants = append(e.Participants, p)
		_, settled := m["s"+strconv.Itoa(i)]
		e.Settled = append(e.Settled, settled)
	}
	return e, nil
}
