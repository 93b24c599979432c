package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// VersionsResult is versions.lua's answer: the current version and the
// kept versions of the history hash.
type VersionsResult struct {
	Ver     int64
	At      time.Time // when the current data was written
	HasData bool
	// Current says why the current version's ver or time disagrees with the
	// record's checksum (nil: they agree, or the record has none).
	Current *CorruptField
	// Kept are the kept versions, oldest first (History.Kept()).
	Kept []Kept
	// History is the listing, for a read of the versions' data or the plan
	// of a write that keeps one.
	History History
}

// Versions lists the versions of the record at key: versions.lua (one
// round trip, read only, its work bounded by the number of versions and
// not their data), then, for each version of an earlier layout too long
// for the script to read its metadata, one HGET of that version.
func Versions(ctx context.Context, rdb redis.Cmdable, key string) (VersionsResult, error) {
	return listVersions(ctx, rdb, key, VersionsArgs{})
}

// VersionsArgs are versions.lua's arguments.
type VersionsArgs struct {
	// WithNewest also fetches the newest kept version's values (what
	// History.Plan needs of it).
	WithNewest bool
}

func (VersionsArgs) keys(key string) []string { return []string{key, HistoryKey(key)} }

func (a VersionsArgs) argv() []any {
	if a.WithNewest {
		return []any{"1"}
	}
	return []any{"0"}
}

// ParseVersionsArgs reads the ARGV of an observed versions.lua call.
func ParseVersionsArgs(argv []string) (VersionsArgs, error) {
	if err := wantArgs(ScriptVersions, argv, 1); err != nil {
		return VersionsArgs{}, err
	}
	switch arg(argv, 1) {
	case "0":
		return VersionsArgs{}, nil
	case "1":
		return VersionsArgs{WithNewest: true}, nil
	}
	return VersionsArgs{}, fmt.Errorf("record: %s flag %q, want 0 or 1", ScriptVersions, arg(argv, 1))
}

// versionsAnswer is versions.lua's answer as it comes: the current
// version's fields, and the history's listing, still to be sorted out.
type versionsAnswer struct {
	ver, at      any
	hasData      bool
	seen, sum    string
	all          bool  // the whole history hash, names and values (a listpack)
	flat, newest []any // the listing; the newest version's fields and values
}

// parseVersions reads versions.lua's answer.
func parseVersions(v any) (versionsAnswer, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 8 {
		return versionsAnswer{}, fmt.Errorf("%w: versions answered %T", ErrUnexpectedAnswer, v)
	}
	a := versionsAnswer{ver: arr[0], at: arr[1], hasData: str(arr[2]) == "1", seen: str(arr[3]), all: str(arr[4]) == "all",
		sum: str(arr[7])}
	a.flat, _ = arr[5].([]any)
	a.newest, _ = arr[6].([]any)
	return a, nil
}

// listVersions is Versions, with what args asks for beside the listing in
// the same script: the newest kept version's value (History.Plan needs it).
func listVersions(ctx context.Context, rdb redis.Cmdable, key string, args VersionsArgs) (VersionsResult, error) {
	a, err := versionsScript.Run(ctx, rdb, key, args)
	if err != nil {
		return VersionsResult{}, err
	}
	res := VersionsResult{Ver: num(a.ver), At: msTime(a.at), HasData: a.hasData}
	if a.sum != "" {
		_, res.Current = StoredRecord{Sum: a.sum, Ver: str(a.ver), At: str(a.at)}.copies()
	}
	newest := a.newest
	var listed []listedField
	if a.all { // the whole hash, name and value
		listed, newest = listedOfAll(a.flat, args.WithNewest)
	} else {
		listed = make([]listedField, 0, len(a.flat)/3)
		for i := 0; i+2 < len(a.flat); i += 3 {
			f := listedField{name: str(a.flat[i]), size: int(num(a.flat[i+2]))}
			if s, ok := a.flat[i+1].(string); ok {
				f.head = &s
			}
			listed = append(listed, f)
		}
	}
	res.History = parseListing(listed)
	res.History.Seen = a.seen
	if len(newest) > 0 {
		res.History.takeNewest(newest)
	}
	if err := res.History.readUnlisted(ctx, rdb, key); err != nil {
		return VersionsResult{}, err
	}
	res.Kept = res.History.Kept()
	return res, nil
}

// listedOfAll lists a whole hash's name/value pairs (flat): every field
// with its value and length, and, withNewest, the newest version's fields
// and values.
func listedOfAll(flat []any, withNewest bool) ([]listedField, []any) {
	listed := make([]listedField, 0, len(flat)/2)
	newestVer := int64(-1)
	for i := 0; i+1 < len(flat); i += 2 {
		value := str(flat[i+1])
		f := listedField{name: str(flat[i]), head: &value, size: len(value)}
		if _, ver, _, ok := histField(f.name); ok {
			newestVer = max(newestVer, ver)
		}
		listed = append(listed, f)
	}
	var newest []any
	for i := 0; withNewest && i+1 < len(flat); i += 2 {
		if _, ver, _, ok := histField(str(flat[i])); ok && ver == newestVer {
			newest = append(newest, flat[i], flat[i+1])
		}
	}
	return listed, newest
}

// takeNewest makes the newest version's values (name, value pairs) its
// fetched value.
func (h *History) takeNewest(vals []any) {
	if len(h.Versions) == 0 {
		return
	}
	byName := make(map[string]any, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		byName[str(vals[i])] = vals[i+1]
	}
	s := &h.Versions[len(h.Versions)-1]
	s.body, s.missing = s.join(byName)
}

// readUnlisted reads the metadata of the versions of an earlier layout
// whose first field was too long for the listing: one HGET each.
func (h *History) readUnlisted(ctx context.Context, rdb redis.Cmdable, key string) error {
	for i := range h.Versions {
		s := &h.Versions[i]
		if !errors.Is(s.Err, errLegacyUnlisted) {
			continue
		}
		v, err := rdb.HGet(ctx, HistoryKey(key), s.fields[0]).Result()
		switch {
		case errors.Is(err, redis.Nil):
			s.Err = errors.New("its metadata field is missing")
			continue
		case err != nil:
			return fmt.Errorf("read version %d: %w", s.Ver, err)
		}
		s.meta = v[:max(legacyMetaLen([]byte(v)), 0)]
		s.Err = s.readLegacyMeta()
	}
	return nil
}

// ErrWipeLost is wipe.lua's answer when the lock is not the caller's:
// nothing was erased.
var ErrWipeLost = errors.New("the lock is not this session's")

// WipeArgs are the arguments of wipe.lua: the lock tokens of the caller's
// session (its own, then earlier ones an adoption has not moved yet).
type WipeArgs struct {
	Tokens []string
}

// Wipe erases the record at key and every key beside it (Keys) under the
// lock one of tokens names (a session's token, then the earlier ones an
// adoption has not moved yet): one round trip. Without that lock it erases
// nothing and answers an error wrapping ErrWipeLost.
func Wipe(ctx context.Context, rdb redis.Scripter, key string, tokens ...string) error {
	if len(tokens) == 0 || tokens[0] == "" {
		return fmt.Errorf("record: wipe %s: no token", key)
	}
	lost, err := wipeScript.Run(ctx, rdb, key, WipeArgs{Tokens: tokens})
	if err == nil && lost {
		err = fmt.Errorf("%w (held under another token or free)", ErrWipeLost)
	}
	return err
}

// keys are KEYS of wipe.lua: the record and every key beside it.
func (a WipeArgs) keys(key string) []string { return Keys(key) }

// argv is ARGV of wipe.lua.
func (a WipeArgs) argv() []any {
	args := make([]any, len(a.Tokens))
	for i, t := range a.Tokens {
		args[i] = t
	}
	return args
}

// parseWipeArgs reads the ARGV of an observed wipe.lua call.
func parseWipeArgs(argv []string) (WipeArgs, error) {
	if len(argv) == 0 {
		return WipeArgs{}, fmt.Errorf("record: %s call without a token", ScriptWipe)
	}
	return WipeArgs{Tokens: slices.Clone(argv)}, nil
}

// parseWipe reads wipe.lua's answer: whether the lock was not the caller's.
func parseWipe(v any) (lost bool, err error) {
	arr, tag, err := tagged(v)
	switch {
	case err != nil:
		return false, err
	case tag == "OK":
		return false, nil
	case tag == "LOST":
		return true, nil
	}
	return false, fmt.Errorf("%w: wipe answered %v", ErrUnexpectedAnswer, arr)
}

// ListForKeep lists the history of the record at key for a write that
// keeps a version (History.Plan): Versions, with the newest kept version's
// value (the plan rewrites it) fetched by the same script; then the
// record's data (the version the write keeps; nil when it has none) by a
// plain HGET. Not by the script: a string of MaxDataBytes passed through
// Lua (the reply copied into a Lua string, then into the script's reply)
// held Redis about 6 ms where HGET holds it 0.3 ms and writes the reply
// in slices between other clients' commands. The two reads need not agree:
// the caller checks the data against the last write it landed, and the
// write that keeps it follows the plan only if the history is still as
// listed.
func ListForKeep(ctx context.Context, rdb redis.Cmdable, key string) (History, []byte, error) {
	res, err := listVersions(ctx, rdb, key, VersionsArgs{WithNewest: true})
	if err != nil {
		return History{}, nil, err
	}
	data, err := rdb.HGet(ctx, key, FieldData).Bytes()
	if errors.Is(err, redis.Nil) {
		return res.History, nil, nil
	}
	if err != nil {
		return History{}, nil, fmt.Errorf("read the data: %w", err)
	}
	return res.History, data, nil
}
