package datadriver

import (
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// writeKind is why a profile writes its record: it decides the script's
// mode, whether the write must be durable (wait for MinReplicas), whether it
// carries data, and how telemetry names it. The domain decides; telemetry
// only hears the name.
type writeKind uint8

const (
	// writeSave is Profile.Save (and the write of a restore).
	writeSave writeKind = iota
	// writeAutosave is the background save (also after messages applied or
	// a trade's borrow).
	writeAutosave
	// writeRelease is the leave save: data written and lock cleared.
	writeRelease
	// writeRefresh rewrites only the lock's timestamp (LockTTL keep-alive).
	writeRefresh
	// writeAdopt is the save of a rejoin that adopts a retained profile.
	writeAdopt
)

// mode is the save script's mode for k.
func (k writeKind) mode() record.WriteMode {
	if k == writeRelease {
		return record.ModeRelease
	}
	return record.ModeSave
}

// durable reports whether a write of kind k waits for MinReplicas: the
// writes the game or a handoff relies on (a Save it asked for, a release
// the next server loads, an adoption's). An autosave or a refresh that a
// replica misses is written again by the next one.
func (k writeKind) durable() bool {
	switch k {
	case writeSave, writeRelease, writeAdopt:
		return true
	}
	return false
}

// carriesData reports whether a write of kind k sends the profile's data
// (a refresh sends none).
func (k writeKind) carriesData() bool { return k != writeRefresh }

// metric is telemetry's name for k.
func (k writeKind) metric() telemetry.WriteKind {
	switch k {
	case writeAutosave:
		return telemetry.WriteAutosave
	case writeRelease:
		return telemetry.WriteRelease
	case writeRefresh:
		return telemetry.WriteRefresh
	case writeAdopt:
		return telemetry.WriteAdopt
	}
	return telemetry.WriteSave
}
