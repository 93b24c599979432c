package transactions

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/checksum"
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
	sum := [][]byte{[]byte(coordinator), []byte(strconv.Itoa(len(parts)))}
	for _, p := range parts {
		desc, err := msgpack.Marshal(&p)
		if err != nil {
			return rscript.Call{}, fmt.Errorf("trade %s: encode participant: %w", id, err)
		}
		args = append(args, desc, p.Image)
		sum = append(sum, desc, p.Image)
	}
	args = append(args, checksum.Of(sum...))
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
