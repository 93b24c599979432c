package main

// What restore reads of a record before it acts, and how it prints its
// report.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
)

// restoreState is a record as restore reads it.
type restoreState struct {
	rk      string
	exists  bool
	now     time.Time // Redis TIME when read
	ver     int64     // the current data's ver
	at      time.Time // and its write time
	hasData bool
	bytes   int
	// corrupt says why the current data does not decode ("" when it does).
	corrupt           string
	schema, schemaMin int
	lock              recordLock
	// versions are the current data (when there is some) and the kept
	// versions, newest first, as Driver.RestoreAt lists them.
	versions []versionInfo
}

// current is the current data as a versionInfo (nil when none).
func (s *restoreState) current() *versionInfo {
	if !s.hasData {
		return nil
	}
	return &versionInfo{Ver: s.ver, At: s.at, Bytes: s.bytes, Schema: s.schema, SchemaMin: s.schemaMin, Corrupt: s.corrupt, current: true}
}

// readRestoreState reads the record of driver/key: its current data, schema
// version, lock and versions (reads only).
func readRestoreState(ctx context.Context, r *reader, driver, key string) (*restoreState, error) {
	rk := record.Key(r.ns, driver, key)
	st := &restoreState{rk: rk}
	var (
		size  *redis.IntCmd
		hm    *redis.SliceCmd
		clock *redis.TimeCmd
	)
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return nil, err
	}
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		size = p.HLen(ctx, rk)
		hm = p.HMGet(ctx, rk, record.FieldData, record.FieldSchema, record.FieldSchemaMin)
		clock = p.Time(ctx)
		return nil
	}); err != nil {
		return nil, err
	}
	st.now, st.exists = clock.Val(), size.Val() > 0
	if !st.exists {
		return st, nil
	}
	vals := hm.Val()
	data, _ := vals[0].(string)
	st.bytes = len(data)
	st.schema = atoiField(vals[1])
	st.schemaMin = atoiField(vals[2])
	if data != "" {
		if _, n, err := msgpackJSON([]byte(data)); err != nil {
			st.corrupt = "its data does not decode as msgpack " + err.Error()
		} else if n < len(data) {
			st.corrupt = fmt.Sprintf("%d bytes follow the value in its data", len(data)-n)
		}
	}
	if st.lock, _, err = r.readLock(ctx, rk); err != nil {
		return nil, err
	}
	if err := st.lock.Err; err != nil {
		return nil, fmt.Errorf("read the record: %w", err)
	}
	res, err := record.Versions(ctx, r.rdb, rk)
	if err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	st.ver, st.at, st.hasData = res.Ver, res.At, res.HasData
	if c := st.current(); c != nil {
		st.versions = append(st.versions, *c)
	}
	// As Driver.RestoreAt lists them: nothing at or above the current ver.
	for _, k := range res.Kept {
		if k.Ver < res.Ver {
			st.versions = append(st.versions, versionInfo{Ver: k.Ver, At: k.At, Schema: k.Schema, SchemaMin: k.SchemaMin})
		}
	}
	slices.SortFunc(st.versions, func(a, b versionInfo) int { return cmp.Compare(b.Ver, a.Ver) })
	return st, nil
}

// atoiField reads a numeric record field (0 when absent).
func atoiField(v any) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}

// printRestore prints a report for people.
func printRestore(w io.Writer, st style, r *restoreReport) {
	row := func(label, value string) { fmt.Fprintf(w, "  %-10s %s\n", st.bold(label), value) }
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	switch {
	case r.Holder == "":
		row("lock", "free")
	case r.HolderPresence != "":
		row("lock", fmt.Sprintf("held by %s (%s)", r.Holder, r.HolderPresence))
	default:
		row("lock", fmt.Sprintf("held by %s (no presence flag)", r.Holder))
	}
	row("at", stamp(r.At))
	if c := r.Current; c != nil {
		s := r.describe(c)
		if c.Corrupt != "" {
			s += ", " + st.red("corrupt: "+c.Corrupt)
		}
		row("current", s)
	}
	if t := r.Target; t != nil && !t.current {
		row("restore", r.describe(t))
	}
	var out string
	switch r.Outcome {
	case restoreDone:
		out = st.green("restored") + ": " + r.Reason
	case restoreWould:
		out = st.yellow("dry run") + ": " + r.Reason
	case "":
		return // refused or failed: the error main prints says why, on stderr
	default:
		out = r.Reason
	}
	fmt.Fprintf(w, "  → %s\n", wrapText(out, 90, "    "))
}

// describe is one version for people: "ver 3, written 2024-06-10T09:00:00.000Z
// (2 h ago), 118 bytes, schema 0".
func (r *restoreReport) describe(v *versionInfo) string {
	s := fmt.Sprintf("ver %d, written %s (%s ago)", v.Ver, stamp(v.At), human(r.now.Sub(v.At).Round(time.Millisecond)))
	if v.Bytes > 0 {
		s += fmt.Sprintf(", %d bytes", v.Bytes)
	}
	return s + fmt.Sprintf(", schema %d", v.Schema)
}
