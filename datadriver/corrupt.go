package datadriver

import (
	"fmt"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/clihint"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// corruptField is the error for a record whose field (or key) f the
// scripts refused: a *CorruptRecordError whose Path is the field and whose
// message names the command that repairs it. Nothing was written.
func (d *Driver[T]) corruptField(key string, f record.CorruptField) error {
	return &CorruptRecordError{Key: key, Path: f.Field,
		Err: fmt.Errorf("%s; nothing was written: %s", f.Why, d.repairHint(key, f.Field))}
}

// repairHint names the CLI command that repairs field of key's record, as
// a command that works as printed: every flag whose value this Node or
// driver sets apart from the CLI's default is given (--namespace and the
// settings the lock rule reads by), and the namespace and key are quoted
// for a POSIX shell where they need it. Only --redis is left to the
// operator's $REDIS_URL, since the library cannot print a password.
func (d *Driver[T]) repairHint(key, field string) string {
	repair := d.cliCommand("repair", key)
	switch {
	case field == record.FieldLockJob:
		return fmt.Sprintf("the lock names no holder; `%s` frees it once no live server can hold its token (with "+
			"$NATS_URL or --nats it asks the live servers, and the holder releases it; the rest must be proven "+
			"stopped), and says which servers may hold it otherwise (the holder's own release clears it)",
			d.cliCommand("repair", key, "--force"))
	case strings.HasPrefix(field, "lock."):
		return fmt.Sprintf("`%s` mends it in place: the holder keeps its lock and token", repair)
	case field == "fmt", field == "schema", field == "schema.min":
		return fmt.Sprintf("only the build that wrote the record knows its value: set it by hand after checking "+
			"(`%s` shows the record)", d.cliCommand("inspect", key))
	case field == "(record)":
		return fmt.Sprintf("`%s` moves a wrong key aside or, for a missing record, starts it over from Defaults "+
			"keeping its history and inbox (then the CLI's restore verb can bring a kept version back)",
			d.cliCommand("repair", key, "--force"))
	}
	return fmt.Sprintf("`%s` repairs it (`--dry-run` shows what it would do)", repair)
}

// cliCommand is `playerdata <verb>` on key of this driver, with the flags
// this Node and driver set apart from the CLI's defaults (see repairHint)
// and extra before the key.
func (d *Driver[T]) cliCommand(verb, key string, extra ...string) string {
	n := d.node
	pc := n.presence.Config()
	f := clihint.Flags{Namespace: n.ns}
	if k := n.cfg.PresenceKey; k != presencecore.DefaultKeyName {
		f.PresenceKey = k
	}
	nonDefault := func(got, def time.Duration) time.Duration {
		if got == def {
			return 0
		}
		return got
	}
	f.PresenceTTL, f.Beat = nonDefault(pc.TTL, presencecore.DefaultTTL), nonDefault(pc.Beat, presencecore.DefaultBeat)
	f.LockTTL, f.LockSkew = nonDefault(d.cfg.LockTTL, defaults.LockTTL), nonDefault(d.cfg.LockSkew, defaults.LockSkew)
	return clihint.Command(verb, d.cfg.Name, key, f, extra...)
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
