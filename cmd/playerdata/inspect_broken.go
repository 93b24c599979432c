package main

// What inspect says of a record another tool broke: each field that is not
// what the library writes, shown as stored, and whether a join refuses the
// record for it (the verdict a join would really get).

import (
	"context"
	"fmt"
	"strings"

	"github.com/ckernel/playerdata/internal/clihint"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

// brokenField is a field (or key) of a record that is not what the library
// writes.
type brokenField struct {
	Field string `json:"field"`
	// Value is the field as stored (absent for a key of the wrong type).
	Value string `json:"value,omitempty"`
	// Repair is what `playerdata repair` would do with it, or why it leaves
	// it.
	Repair string `json:"repair"`
	// JoinRefuses: a join of the key is refused at once
	// (ErrCorruptRecord naming this field), nothing written.
	JoinRefuses bool `json:"join_refuses"`
}

// readBroken lists the broken fields and keys of the record rk: what a dry
// run of repair (repair.lua, which writes nothing) finds, each with its
// stored value from v, and whether acquire.lua refuses the record for it
// (it checks the integers it computes with, the lock, a missing record
// whose history or inbox remains, and the inbox and history keys when
// inbox.seq or hist.at say they are in use).
func readBroken(ctx context.Context, r *reader, rk string, v map[string]string) ([]brokenField, error) {
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return nil, err
	}
	res, err := record.Repair(ctx, node, rk, record.RepairArgs{DryRun: true, Skew: defaults.LockSkew})
	if err != nil {
		return nil, fmt.Errorf("check the record's fields: %w", err)
	}
	var out []brokenField
	for _, fs := range [][]record.CorruptField{res.Changed, res.Left} {
		for _, f := range fs {
			b := brokenField{Field: f.Field, Value: v[f.Field], Repair: f.Why}
			switch f.Field {
			case record.FieldReleasedVer:
			case "inbox":
				b.JoinRefuses = v[record.FieldInboxSeq] != "" && v[record.FieldInboxSeq] != "0"
			case "history":
				b.JoinRefuses = v[record.FieldHistAt] != ""
			case "tries", "dead":
			default:
				b.JoinRefuses = true
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// brokenVerdict is the verdict on a record a join refuses; "" when none
// of bs makes it refuse.
func brokenVerdict(r *inspectReport, bs []brokenField) string {
	var refused []string
	first := ""
	for _, b := range bs {
		if b.JoinRefuses {
			refused = append(refused, b.Field)
			if first == "" {
				first = b.Field
			}
		}
	}
	if len(refused) == 0 {
		return ""
	}
	extra := []string{"--dry-run"}
	if first == record.FieldLockJob || first == "(record)" {
		extra = append(extra, "--force")
	}
	cmd := clihint.Command("repair", r.Driver, r.Key, clihint.Flags{Namespace: r.Namespace}, extra...)
	return fmt.Sprintf("a join is refused at once with ErrCorruptRecord naming %s (broken: %s), nothing written; "+
		"`%s` shows what repair does with it", first, strings.Join(refused, ", "), cmd)
}
