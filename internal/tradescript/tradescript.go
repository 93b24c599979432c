// Package tradescript holds the trade journal's scripts, each with its one
// typed definition (rscript.Typed): the arguments it is called with, the
// parser of an observed call and the reader of its answer. The public
// transactions package runs them for its Journal; datadriver pipelines the
// begin with the participants' prepare marks; tests and the simulation find
// a script by its name and read its calls back.
package tradescript

import (
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/checksum"
	"github.com/ckernel/playerdata/internal/rscript"
)

// The names of the journal's scripts, as an rscript.Catalog reports them.
const (
	NameBegin   = "trade-begin"
	NameMove    = "trade-move"
	NameSettled = "trade-settled"
)

var (
	//go:embed lua/begin.lua
	beginSrc string
	//go:embed lua/move.lua
	moveSrc string
	//go:embed lua/settled.lua
	settledSrc string
)

// The scripts are immutable values shared by every client.
var (
	begin = rscript.NewTyped(NameBegin, beginSrc, rscript.Protocol[BeginArgs, Result]{
		Keys: oneKey[BeginArgs], Args: BeginArgs.argv, Parse: ParseBeginArgs, Answer: parseResult("EXISTS")})
	move = rscript.NewTyped(NameMove, moveSrc, rscript.Protocol[MoveArgs, Result]{
		Keys: oneKey[MoveArgs], Args: MoveArgs.argv, Parse: ParseMoveArgs, Answer: parseResult("STATE")})
	settled = rscript.NewTyped(NameSettled, settledSrc, rscript.Protocol[SettledArgs, Result]{
		Keys: oneKey[SettledArgs], Args: SettledArgs.argv, Parse: ParseSettledArgs, Answer: parseResult("STATE")})
)

// All lists the journal's scripts (for an rscript.Catalog).
func All() []*rscript.Script { return []*rscript.Script{begin.Script, move.Script, settled.Script} }

// Begin is begin.lua: it opens a trade's entry as PREPARED.
func Begin() *rscript.Typed[BeginArgs, Result] { return begin }

// Move is move.lua: the compare-and-set of a trade's state (the commit
// point, and every abort).
func Move() *rscript.Typed[MoveArgs, Result] { return move }

// Settled is settled.lua: participants of a committed trade marked
// settled.
func Settled() *rscript.Typed[SettledArgs, Result] { return settled }

func oneKey[A any](_ A, key string) []string { return []string{key} }

// Desc is a participant's descriptor as the entry stores it (msgpack,
// field p<i>): which profile, and its lock token, record version and image
// schema at prepare.
type Desc struct {
	Driver    string `msgpack:"d"`
	Key       string `msgpack:"k"`
	Token     string `msgpack:"l"` // the coordinator's lock token at prepare
	Ver       int64  `msgpack:"v"` // the record version at prepare
	Schema    int    `msgpack:"s,omitempty"`
	SchemaMin int    `msgpack:"m,omitempty"`
}

// DecodeDesc reads a stored descriptor.
func DecodeDesc(b []byte) (Desc, error) {
	var d Desc
	err := msgpack.Unmarshal(b, &d)
	return d, err
}

// Part is one participant of a begin: its descriptor and its post-trade
// image (field img<i>).
type Part struct {
	Desc
	Image []byte
}

// BeginArgs are begin.lua's arguments.
type BeginArgs struct {
	Coordinator string
	Retain      time.Duration // a PREPARED entry expires this long after it is opened
	Parts       []Part
}

// argv is ARGV of begin.lua: the coordinator, the count, the retention,
// each participant's descriptor and image, and the checksum of the
// coordinator, the count and every descriptor and image.
func (a BeginArgs) argv() []any {
	n := strconv.Itoa(len(a.Parts))
	args := []any{a.Coordinator, len(a.Parts), a.Retain.Milliseconds()}
	sum := [][]byte{[]byte(a.Coordinator), []byte(n)}
	for _, p := range a.Parts {
		// A struct of strings and integers always encodes.
		desc, _ := msgpack.Marshal(&p.Desc)
		args = append(args, desc, p.Image)
		sum = append(sum, desc, p.Image)
	}
	return append(args, checksum.Of(sum...))
}

// ParseBeginArgs reads the ARGV of an observed begin.lua call.
func ParseBeginArgs(argv []string) (BeginArgs, error) {
	if len(argv) < 4 || len(argv)%2 != 0 {
		return BeginArgs{}, fmt.Errorf("tradescript: %s call with %d arguments", NameBegin, len(argv))
	}
	n, err1 := strconv.Atoi(argv[1])
	ms, err2 := strconv.ParseInt(argv[2], 10, 64)
	if err1 != nil || err2 != nil || n != (len(argv)-4)/2 {
		return BeginArgs{}, fmt.Errorf("tradescript: %s call with count %q and retention %q for %d arguments",
			NameBegin, argv[1], argv[2], len(argv))
	}
	a := BeginArgs{Coordinator: argv[0], Retain: time.Duration(ms) * time.Millisecond}
	for i := range n {
		d, err := DecodeDesc([]byte(argv[3+2*i]))
		if err != nil {
			return BeginArgs{}, fmt.Errorf("tradescript: %s participant %d: %w", NameBegin, i, err)
		}
		a.Parts = append(a.Parts, Part{Desc: d, Image: []byte(argv[4+2*i])})
	}
	return a, nil
}

// MoveArgs are move.lua's arguments: From is the expected state ("" for
// no entry), To the new one; an ABORTED entry expires Retain after it is
// set.
type MoveArgs struct {
	From, To string
	Retain   time.Duration
}

func (a MoveArgs) argv() []any { return []any{a.From, a.To, a.Retain.Milliseconds()} }

// ParseMoveArgs reads the ARGV of an observed move.lua call (a commit is
// From PREPARED, To COMMITTED).
func ParseMoveArgs(argv []string) (MoveArgs, error) {
	if len(argv) != 3 {
		return MoveArgs{}, fmt.Errorf("tradescript: %s call with %d arguments, want 3", NameMove, len(argv))
	}
	ms, err := strconv.ParseInt(argv[2], 10, 64)
	if err != nil {
		return MoveArgs{}, fmt.Errorf("tradescript: %s retention %q: %w", NameMove, argv[2], err)
	}
	return MoveArgs{From: argv[0], To: argv[1], Retain: time.Duration(ms) * time.Millisecond}, nil
}

// SettledArgs are settled.lua's arguments: the participants (0-based) now
// settled; once all are, the entry expires Retain later.
type SettledArgs struct {
	Retain time.Duration
	Idx    []int
}

func (a SettledArgs) argv() []any {
	args := []any{a.Retain.Milliseconds()}
	for _, i := range a.Idx {
		args = append(args, i)
	}
	return args
}

// ParseSettledArgs reads the ARGV of an observed settled.lua call.
func ParseSettledArgs(argv []string) (SettledArgs, error) {
	if len(argv) < 1 {
		return SettledArgs{}, fmt.Errorf("tradescript: %s call with no arguments", NameSettled)
	}
	ms, err := strconv.ParseInt(argv[0], 10, 64)
	if err != nil {
		return SettledArgs{}, fmt.Errorf("tradescript: %s retention %q: %w", NameSettled, argv[0], err)
	}
	a := SettledArgs{Retain: time.Duration(ms) * time.Millisecond}
	for _, s := range argv[1:] {
		i, err := strconv.Atoi(s)
		if err != nil {
			return SettledArgs{}, fmt.Errorf("tradescript: %s index %q: %w", NameSettled, s, err)
		}
		a.Idx = append(a.Idx, i)
	}
	return a, nil
}

// Result is a journal script's answer: it did what it was asked (Done), or
// it found the entry in another state (State; "" for no entry).
type Result struct {
	Done  bool
	State string
}

// parseResult reads {'OK', ...} or {other, state}, where other is the word
// the script answers when the entry is not as expected.
func parseResult(other string) func(any) (Result, error) {
	return func(v any) (Result, error) {
		arr, _ := v.([]any)
		switch {
		case len(arr) > 0 && arr[0] == "OK":
			return Result{Done: true}, nil
		case len(arr) > 1 && arr[0] == other:
			s, _ := arr[1].(string)
			return Result{State: s}, nil
		}
		return Result{}, fmt.Errorf("tradescript: unexpected answer %v", v)
	}
}
