package datadriver

import (
	"fmt"
	"strings"

	"github.com/ckernel/playerdata/internal/record"
)

// corruptField is the error for a record whose field (or key) f the
// scripts refused: a *CorruptRecordError whose Path is the field and whose
// message names the command that repairs it. Nothing was written.
func (d *Driver[T]) corruptField(key string, f record.CorruptField) error {
	return &CorruptRecordError{Key: key, Path: f.Field,
		Err: fmt.Errorf("%s; nothing was written: %s", f.Why, repairHint(d.cfg.Name, key, f.Field))}
}

// repairHint names the CLI command that repairs field of key's record.
func repairHint(driver, key, field string) string {
	switch {
	case strings.HasPrefix(field, "lock."):
		return fmt.Sprintf("if no process uses that lock, `playerdata repair --force --driver %s %s` frees it", driver, key)
	case field == "fmt", field == "schema", field == "schema.min":
		return "only the build that wrote the record knows its value: set it by hand after checking " +
			"(`playerdata inspect` shows the record)"
	case field == "(record)":
		return fmt.Sprintf("`playerdata repair --force --driver %s %s` moves a wrong key aside or, for a missing record, "+
			"starts it over from Defaults keeping its history and inbox (then `playerdata restore` can bring a "+
			"kept version back)", driver, key)
	}
	return fmt.Sprintf("`playerdata repair --driver %s %s` repairs it (`--dry-run` shows what it would do)", driver, key)
}

// checkStored checks a record's data against its checksum: nil, or a
// *CorruptRecordError naming the damaged field.
func checkStored(key string, r record.StoredRecord) error {
	cf := r.Check()
	if cf == nil {
		return nil
	}
	return &CorruptRecordError{Key: key, Path: cf.Field, Err: fmt.Errorf("%s; nothing was written: restore a kept "+
		"version (Driver.RestoreAt, playerdata restore) or wipe the record", cf.Why)}
}
