package record

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
)

// WriteMode is what a save.lua call does.
type WriteMode string

// The write modes.
const (
	// ModeSave writes under the lock and keeps it.
	ModeSave WriteMode = "save"
	// ModeRelease writes and clears the lock.
	ModeRelease WriteMode = "release"
	// ModeSettle writes a trade's image: it lands only while the record is
	// marked with that trade, and clears the mark.
	ModeSettle WriteMode = "settle"
)

// Meta is the user ids and metadata kept beside the data (opaque blobs).
type Meta struct {
	UserIDs, Meta []byte
}

// SaveArgs are the arguments of save.lua.
type SaveArgs struct {
	Mode WriteMode
	// Seq is the write's place in its profile's writes (1, 2, 3, ...; 0:
	// none): a write below the highest that landed in the record's epoch
	// (the record's lock.seq, "<epoch>,<n>": every acquisition and move
	// steps the epoch) is late and refused (Superseded), so that a write
	// delivered after a newer one never puts older data over it.
	Seq int64
	// Token is the profile's lock token; Earlier are tokens the lock may
	// still carry (adoptions that have not landed).
	Token   string
	Earlier []string
	// Job and Presence are written when the lock moves to Token.
	Job      string
	Presence bool
	// Data is the new data; nil keeps the stored data (a save of unchanged
	// data refreshes only the lock).
	Data []byte
	// Schema and SchemaMin are written with Data: the schema version it was
	// encoded at and the lowest that may read it.
	Schema, SchemaMin int
	// Sum is the record's checksum after this write (RecordSum of the data,
	// schema, min-reader, user ids and metadata it will hold), required
	// with Data or Meta.
	Sum string
	// Meta is the new user ids and metadata; nil keeps the stored ones.
	Meta *Meta
	// History is how many versions the record's history keeps; HistoryEvery
	// how long after the last kept version a data write keeps the data it
	// replaces.
	History      int
	HistoryEvery time.Duration
	// Keep is the data this write replaces (version KeepVer), kept whole
	// (NewKeptWhole), sent when the caller reckons a version is due.
	// KeepMeta is that data's time, schema and min-reader as the caller
	// read them and wrote them in Keep's header: the script keeps it only
	// if the record still says so. KeepAlways keeps it whatever
	// HistoryEvery says (the data before a restore).
	Keep       KeptValue
	KeepVer    int64
	KeepMeta   KeptMeta
	KeepAlways bool
	// KeepPlan is what the write does to the history beside keeping Keep,
	// as planned from a listing of it (History.Plan): the versions it
	// trims, and the previous newest rewritten. Without it, or when the
	// history changed since that listing, the script trims by count by
	// itself and rewrites nothing.
	KeepPlan *HistoryPlan
	// Trade is the trade this write settles (its mark is cleared), or "".
	Trade string
	// Applied are the ids of inbox messages the new data has applied: the
	// write deletes them from the inbox, so each is applied exactly once.
	Applied []string
	// Refused are inbox messages the holder's OnMessage refused: each
	// refusal is counted on the record (under Job), and a message refused
	// MaxAttempts times moves to the dead letters (0: never).
	Refused     []Refusal
	MaxAttempts int
}

// Refusal is one refusal of an inbox message by OnMessage.
type Refusal struct {
	// ID is the message's inbox id; Err says why it was refused.
	ID, Err string
}

// The names of save.lua's options (ARGV[7..]).
const (
	saveOptMeta    = "meta"
	saveOptTrade   = "trade"
	saveOptKeep    = "keep"
	saveOptEarlier = "earlier"
	saveOptRefused = "refused"
	saveOptApplied = "applied"
)

// saveFixedArgs is how many arguments every save.lua call has; the options
// follow.
const saveFixedArgs = 7

// argv is ARGV of save.lua: mode, token, schema, min schema, data, sum and
// the write's place in its session (Seq), then only the options the call
// uses.
func (a SaveArgs) argv() []any {
	n := saveFixedArgs
	if a.Meta != nil {
		n += 3
	}
	if a.Trade != "" {
		n += 2
	}
	if a.keeps() {
		n += saveKeepArgs + 2*(a.Keep.Len()/HistChunk+2) + len(a.KeepPlan.drop())
	}
	if len(a.Earlier) > 0 {
		n += 4 + len(a.Earlier)
	}
	if len(a.Refused) > 0 {
		n += 4 + 3*len(a.Refused)
	}
	if len(a.Applied) > 0 {
		n += 1 + len(a.Applied)
	}
	argv := make([]any, saveFixedArgs, n)
	argv[0], argv[1], argv[5], argv[6] = a.Mode.arg(), a.Token, a.Sum, a.Seq
	if a.Data != nil {
		argv[2], argv[3], argv[4] = a.Schema, a.SchemaMin, a.Data
	} else {
		argv[2], argv[3], argv[4] = "", "", ""
	}
	if a.Meta != nil {
		argv = append(argv, saveOptMeta, a.Meta.UserIDs, a.Meta.Meta)
	}
	if a.Trade != "" {
		argv = append(argv, saveOptTrade, a.Trade)
	}
	if a.keeps() {
		argv = a.appendKeep(argv)
	}
	if len(a.Earlier) > 0 {
		argv = append(argv, saveOptEarlier, a.Job, flag(a.Presence), len(a.Earlier))
		for _, e := range a.Earlier {
			argv = append(argv, e)
		}
	}
	if len(a.Refused) > 0 {
		argv = append(argv, saveOptRefused, a.MaxAttempts, a.Job, len(a.Refused))
		for _, r := range a.Refused {
			argv = append(argv, r.ID, r.Err, RefusalSum(r.ID, r.Err, a.Job))
		}
	}
	if len(a.Applied) > 0 {
		argv = append(argv, saveOptApplied)
		for _, id := range a.Applied {
			argv = append(argv, id)
		}
	}
	return argv
}

// saveKeepArgs is how many arguments the 'keep' option has before its
// field/value pairs.
const saveKeepArgs = 12

// appendKeep appends the 'keep' option: n, every, oldVer, always, the
// plan's seen hist.at, the at, schema and schema.min Keep's header says,
// how many field/value pairs hold the kept version and the rewritten one,
// how many fields to delete; then those pairs and fields.
func (a SaveArgs) appendKeep(argv []any) []any {
	head := len(argv)
	m := a.KeepMeta
	at := ""
	if !m.At.IsZero() {
		at = strconv.FormatInt(m.At.UnixMilli(), 10)
	}
	argv = append(argv, saveOptKeep, a.History, a.HistoryEvery.Milliseconds(), a.KeepVer, flag(a.KeepAlways), "",
		at, strconv.Itoa(m.Schema), strconv.Itoa(m.SchemaMin), 0, 0, 0)
	argv = keptFields(argv, a.KeepVer, a.Keep)
	nKeep := (len(argv) - head - saveKeepArgs) / 2
	nRewrite := 0
	if p := a.KeepPlan; p != nil {
		argv[head+5] = p.Seen
		if p.RewriteVer != 0 {
			argv = keptFields(argv, p.RewriteVer, p.Rewrite)
			nRewrite = (len(argv)-head-saveKeepArgs)/2 - nKeep
		}
		for _, f := range p.Drop {
			argv = append(argv, f)
		}
	}
	argv[head+9], argv[head+10], argv[head+11] = nKeep, nRewrite, len(a.KeepPlan.drop())
	return argv
}

// drop is p.Drop (none without a plan).
func (p *HistoryPlan) drop() []string {
	if p == nil {
		return nil
	}
	return p.Drop
}

// keeps reports whether the call may keep a version: it carries new data,
// the data it replaces, and a history to keep it in.
func (a SaveArgs) keeps() bool { return a.Data != nil && a.Keep.Len() > 0 && a.History > 0 }

// arg is the mode as save.lua takes it (a constant: no allocation).
func (m WriteMode) arg() any {
	switch m {
	case ModeSave:
		return string(ModeSave)
	case ModeRelease:
		return string(ModeRelease)
	case ModeSettle:
		return string(ModeSettle)
	}
	return string(m)
}

// keys are KEYS of save.lua for the record at key: the inbox, history,
// refusal counts and dead letters only when the call may touch them.
func (a SaveArgs) keys(key string) []string {
	if a.keeps() || len(a.Applied) > 0 || len(a.Refused) > 0 {
		return []string{key, InboxKey(key), HistoryKey(key), TriesKey(key), DeadKey(key), IdemAtKey(key)}
	}
	return []string{key}
}

// Call is the save.lua call for the record at key, to run in a pipeline,
// with the reader of its answer.
func (a SaveArgs) Call(key string) rscript.Pending[SaveResult] {
	return saveScript.Call(key, a)
}

// ParseSaveArgs reads the ARGV of an observed save.lua call. Job and
// Presence are known only when the call carries earlier tokens (only then
// can the lock move to it), History and HistoryEvery only when it carries
// data to keep.
func ParseSaveArgs(argv []string) (SaveArgs, error) {
	if len(argv) < saveFixedArgs {
		return SaveArgs{}, fmt.Errorf("record: %s call with %d arguments, want %d or more", ScriptSave, len(argv), saveFixedArgs)
	}
	a := SaveArgs{Mode: WriteMode(arg(argv, 1)), Token: arg(argv, 2), Sum: arg(argv, 6)}
	a.Seq, _ = strconv.ParseInt(arg(argv, 7), 10, 64)
	if arg(argv, 3) != "" {
		a.Schema, _ = strconv.Atoi(arg(argv, 3))
		a.SchemaMin, _ = strconv.Atoi(arg(argv, 4))
		a.Data = []byte(arg(argv, 5))
	}
	bad := func(what string) error {
		return fmt.Errorf("record: %s call with a short %q option in %d arguments", ScriptSave, what, len(argv))
	}
	i := saveFixedArgs + 1 // 1-based, as in Lua
	if arg(argv, i) == saveOptMeta {
		if i+2 > len(argv) {
			return SaveArgs{}, bad(saveOptMeta)
		}
		a.Meta = &Meta{UserIDs: []byte(arg(argv, i+1)), Meta: []byte(arg(argv, i+2))}
		i += 3
	}
	if arg(argv, i) == saveOptTrade {
		if i+1 > len(argv) {
			return SaveArgs{}, bad(saveOptTrade)
		}
		a.Trade = arg(argv, i+1)
		i += 2
	}
	if arg(argv, i) == saveOptKeep {
		var ok bool
		if i, ok = a.parseKeep(argv, i); !ok {
			return SaveArgs{}, bad(saveOptKeep)
		}
	}
	if arg(argv, i) == saveOptEarlier {
		n, err := strconv.Atoi(arg(argv, i+3))
		if err != nil || n < 0 || i+3+n > len(argv) {
			return SaveArgs{}, bad(saveOptEarlier)
		}
		a.Job, a.Presence = arg(argv, i+1), arg(argv, i+2) == "1"
		a.Earlier = append([]string(nil), argv[i+3:i+3+n]...)
		i += 4 + n
	}
	if arg(argv, i) == saveOptRefused {
		n, err := strconv.Atoi(arg(argv, i+3))
		if err != nil || n < 0 || i+3+3*n > len(argv) {
			return SaveArgs{}, bad(saveOptRefused)
		}
		a.MaxAttempts, _ = strconv.Atoi(arg(argv, i+1))
		a.Job = arg(argv, i+2)
		for j := 0; j < n; j++ {
			a.Refused = append(a.Refused, Refusal{ID: arg(argv, i+4+3*j), Err: arg(argv, i+5+3*j)})
		}
		i += 4 + 3*n
	}
	if arg(argv, i) == saveOptApplied {
		a.Applied = append([]string(nil), argv[i:]...)
		i = len(argv) + 1
	}
	if i <= len(argv) {
		return SaveArgs{}, fmt.Errorf("record: %s call with an unknown option %q", ScriptSave, arg(argv, i))
	}
	return a, nil
}

// parseKeep reads the 'keep' option at argv[i] (1-based) into a and
// returns the index after it.
func (a *SaveArgs) parseKeep(argv []string, i int) (int, bool) {
	nKeep, err1 := strconv.Atoi(arg(argv, i+9))
	nRewrite, err2 := strconv.Atoi(arg(argv, i+10))
	nDrop, err3 := strconv.Atoi(arg(argv, i+11))
	end := i + saveKeepArgs + 2*(nKeep+nRewrite) + nDrop
	if errors.Join(err1, err2, err3) != nil || nKeep < 0 || nRewrite < 0 || nDrop < 0 || end-1 > len(argv) {
		return i, false
	}
	a.History, _ = strconv.Atoi(arg(argv, i+1))
	every, _ := strconv.ParseInt(arg(argv, i+2), 10, 64)
	a.HistoryEvery = time.Duration(every) * time.Millisecond
	a.KeepVer, _ = strconv.ParseInt(arg(argv, i+3), 10, 64)
	a.KeepAlways = arg(argv, i+4) == "1"
	if at, err := strconv.ParseInt(arg(argv, i+6), 10, 64); err == nil {
		a.KeepMeta.At = time.UnixMilli(at)
	}
	a.KeepMeta.Schema, _ = strconv.Atoi(arg(argv, i+7))
	a.KeepMeta.SchemaMin, _ = strconv.Atoi(arg(argv, i+8))
	j := i + saveKeepArgs
	a.Keep, j = parseKeptPairs(argv, j, nKeep)
	if seen := arg(argv, i+5); seen != "" || nRewrite > 0 || nDrop > 0 {
		p := &HistoryPlan{Seen: seen}
		if nRewrite > 0 {
			_, p.RewriteVer, _, _ = histField(arg(argv, j))
		}
		p.Rewrite, j = parseKeptPairs(argv, j, nRewrite)
		p.Drop = append([]string(nil), argv[j-1:j-1+nDrop]...)
		a.KeepPlan = p
	}
	return end, true
}

// parseKeptPairs reads n field/value pairs from argv[j] (1-based) as one
// kept value, and returns the index after them. keptFields wrote either a
// header and a body (two fields, the header shorter than a chunk) or one
// value cut into chunks of HistChunk bytes.
func parseKeptPairs(argv []string, j, n int) (KeptValue, int) {
	var v KeptValue
	if n == 2 && len(arg(argv, j+1)) < HistChunk {
		v.Head, v.Body = []byte(arg(argv, j+1)), []byte(arg(argv, j+3))
		return v, j + 4
	}
	for range n {
		v.Head, j = append(v.Head, arg(argv, j+1)...), j+2
	}
	return v, j
}
