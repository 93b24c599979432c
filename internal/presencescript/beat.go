// Package presencescript holds presence's Lua scripts (the beat, the read,
// the list, the removal and the shard-count mark of a presence hash) with
// their typed arguments and answers (the list's answer is read by
// presencecore's parseList): package presencecore runs them, and the tools
// that watch beats on the wire (the script catalog of the tests, the
// simulation, the bench, the demo) read them.
package presencescript

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/enum"
	"github.com/ckernel/playerdata/internal/rscript"
)

var (
	//go:embed beat.lua
	beatLua string
	//go:embed read.lua
	readLua string
	//go:embed list.lua
	listLua string
	//go:embed remove.lua
	removeLua string
	//go:embed shards.lua
	shardsLua string
)

// The names of the presence scripts, as an rscript.Catalog reports them.
const (
	NameBeat   = "presence-beat"
	NameRead   = "presence-read"
	NameList   = "presence-list"
	NameRemove = "presence-remove"
	NameShards = "presence-shards"
)

// Beat is beat.lua with its one typed definition; the other presence
// scripts are typed too (typed.go, list.go). All are immutable values
// shared by every client. Presence runs the beat with RunOrReload: a
// NOSCRIPT answer (Redis forgot its scripts: a restart, a failover, SCRIPT
// FLUSH) makes that beat a full check.
var Beat = rscript.NewTyped(NameBeat, beatLua, rscript.Protocol[BeatArgs, BeatAnswer]{Keys: beatKeys,
	Args: beatArgv, Parse: ParseBeatArgs, Answer: ParseBeatAnswer})

// All lists the presence scripts (for an rscript.Catalog).
func All() []*rscript.Script {
	return []*rscript.Script{Beat.Script, Read.Script, List.Script, Remove.Script, Shards.Script}
}

// ErrUnexpectedReply means a script answered (or was called) in a shape
// this package does not know; presence.ErrUnexpectedReply is this error.
var ErrUnexpectedReply = errors.New("presence: unexpected script reply")

// BeatArgs are the arguments of beat.lua; its KEYS[1] is the shard hash.
type BeatArgs struct {
	// Owners and Load are the shard's owners and load hashes (KEYS[2],
	// KEYS[3]; not read back from an observed call).
	Owners, Load string
	// JobID is the beating server.
	JobID string
	// TTL is how long the beat keeps it alive (Redis clock).
	TTL time.Duration
	// Instance is the beating process (Config.Instance).
	Instance string
	// Expected is the expiry this instance's last acknowledged beat wrote
	// (ms precision): when the field still holds it, the beat takes the fast
	// path. Zero: none, go to the full path.
	Expected time.Time
	// Check asks for a full check: the run meta against INFO server, and a
	// few expired fields cleaned.
	Check bool
	// WriteSessions asks a written beat to write Sessions, the server's
	// session count, into the load hash (KEYS[3]) too.
	WriteSessions bool
	// Sessions is the session count written when WriteSessions is set.
	Sessions int
}

func beatKeys(a BeatArgs, key string) []string { return []string{key, a.Owners, a.Load} }

// beatArgv is ARGV of beat.lua: the common beat (no check, no count) sends
// the first four alone, the script reading the others as 0 and -1.
func beatArgv(a BeatArgs) []any {
	var expected int64
	if !a.Expected.IsZero() {
		expected = a.Expected.UnixMilli()
	}
	if !a.Check && !a.WriteSessions {
		return []any{a.JobID, a.TTL.Milliseconds(), a.Instance, expected}
	}
	check := 0
	if a.Check {
		check = 1
	}
	sessions := -1
	if a.WriteSessions {
		sessions = a.Sessions
	}
	return []any{a.JobID, a.TTL.Milliseconds(), a.Instance, expected, check, sessions}
}

// ParseBeatArgs reads the ARGV of an observed beat.lua call: four
// arguments (a common beat), five (a build before the session count) or
// six.
func ParseBeatArgs(argv []string) (BeatArgs, error) {
	if len(argv) < 4 || len(argv) > 6 {
		return BeatArgs{}, fmt.Errorf("%w: %s call with %d arguments, want 4 to 6", ErrUnexpectedReply, NameBeat, len(argv))
	}
	var n [3]int64
	for i, j := range []int{1, 3, 4} {
		if j >= len(argv) {
			break // no check argument: 0
		}
		v, err := strconv.ParseInt(argv[j], 10, 64)
		if err != nil {
			return BeatArgs{}, fmt.Errorf("%w: %s argument %d is %q", ErrUnexpectedReply, NameBeat, j+1, argv[j])
		}
		n[i] = v
	}
	a := BeatArgs{JobID: argv[0], TTL: time.Duration(n[0]) * time.Millisecond, Instance: argv[2], Check: n[2] == 1}
	if n[1] != 0 {
		a.Expected = time.UnixMilli(n[1])
	}
	if len(argv) == 6 {
		v, err := strconv.Atoi(argv[5])
		if err != nil || v < -1 {
			return BeatArgs{}, fmt.Errorf("%w: %s argument 6 is %q", ErrUnexpectedReply, NameBeat, argv[5])
		}
		a.WriteSessions, a.Sessions = v >= 0, max(v, 0)
	}
	return a, nil
}

// BeatOutcome is what a beat did with the JobID's field.
type BeatOutcome int

const (
	// BeatWritten: the beat was written (the field was ours, or free).
	BeatWritten BeatOutcome = iota
	// BeatRefused: another instance's beat is live; nothing was written.
	BeatRefused
	// BeatTakenOver: the beat was written over another instance's beat
	// that had expired.
	BeatTakenOver
)

// String returns "written", "refused" or "taken-over".
func (o BeatOutcome) String() string {
	if name, ok := enum.Name(o, "written", "refused", "taken-over"); ok {
		return name
	}
	return "BeatOutcome(" + strconv.Itoa(int(o)) + ")"
}

// BeatAnswer is beat.lua's answer.
type BeatAnswer struct {
	// Outcome says whether the beat was written.
	Outcome BeatOutcome
	// ExpiresAt is when this beat expires (Redis clock, ms precision); zero
	// when it was refused.
	ExpiresAt time.Time
	// Reset is true when the beat found another Redis run (a restart or a
	// failover) or no run meta at all, and started the meta over.
	Reset bool
	// Other is the instance whose beat was refused to be overwritten
	// (BeatRefused) or was taken over (BeatTakenOver); "" when that beat had
	// no owner.
	Other string
	// OtherExpiresAt is when Other's beat expires or expired (Redis clock);
	// zero when unknown.
	OtherExpiresAt time.Time
	// At is the Redis time of the beat.
	At time.Time
	// Load says what became of the session count the beat carried.
	Load LoadOutcome
}

// LoadOutcome is what a beat did with the session count it carried.
type LoadOutcome int

const (
	// LoadNotSent: the beat carried no count, or was refused.
	LoadNotSent LoadOutcome = iota
	// LoadWritten: the count was written into the load hash.
	LoadWritten
	// LoadFailed: the load hash refused the write (its key holds another
	// type: another tool wrote there); the beat itself was written.
	LoadFailed
)

// String returns "not-sent", "written" or "failed".
func (o LoadOutcome) String() string {
	if name, ok := enum.Name(o, "not-sent", "written", "failed"); ok {
		return name
	}
	return "LoadOutcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseBeatAnswer reads beat.lua's answer: three values from the fast
// path (expiresAt, now, load), else six (from a build before the session
// count) or seven.
func ParseBeatAnswer(v any) (BeatAnswer, error) {
	arr, ok := v.([]any)
	if ok && len(arr) == 3 {
		return parseFastAnswer(arr)
	}
	if !ok || (len(arr) != 6 && len(arr) != 7) {
		return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
	}
	var load int64
	if len(arr) == 7 {
		if load, ok = arr[6].(int64); !ok || load < 0 || load > int64(LoadFailed) {
			return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
		}
	}
	var n [5]int64
	for i, j := range []int{0, 1, 2, 4, 5} {
		if n[i], ok = arr[j].(int64); !ok {
			return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
		}
	}
	other, ok := arr[3].(string)
	if !ok || n[0] < 0 || n[0] > int64(BeatTakenOver) {
		return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
	}
	a := BeatAnswer{Outcome: BeatOutcome(n[0]), Reset: n[2] == 1, Other: other, At: time.UnixMilli(n[4]),
		Load: LoadOutcome(load)}
	if n[1] != 0 {
		a.ExpiresAt = time.UnixMilli(n[1])
	}
	if n[3] != 0 {
		a.OtherExpiresAt = time.UnixMilli(n[3])
	}
	return a, nil
}

// parseFastAnswer reads the fast path's answer {expiresAt, now, load}: a
// beat written over our own, which started no new run meta.
func parseFastAnswer(arr []any) (BeatAnswer, error) {
	var n [3]int64
	for i, x := range arr {
		v, ok := x.(int64)
		if !ok {
			return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, arr)
		}
		n[i] = v
	}
	if n[0] <= 0 || n[1] <= 0 || n[2] < 0 || n[2] > int64(LoadFailed) {
		return BeatAnswer{}, fmt.Errorf("%w: %v", ErrUnexpectedReply, arr)
	}
	return BeatAnswer{Outcome: BeatWritten, ExpiresAt: time.UnixMilli(n[0]), At: time.UnixMilli(n[1]),
		Load: LoadOutcome(n[2])}, nil
}
