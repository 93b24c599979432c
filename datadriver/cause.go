package datadriver

import (
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// cause is why a session stopped being playable: the one classification
// from which the game's KickReason, the lock-loss metric and the log's word
// are derived. A session has at most two causes in its life, in this
// order: a leave cause (the session was asked to go: its release saves it)
// and an end cause (how it ended). The game hears one Kick: at the leave,
// or at the end when there was no leave.
type cause uint8

const (
	causeNone cause = iota

	// Leaves: the session stops; the release saves what it changed.
	causeJoinedElsewhere // another server or session asked for the profile
	causeRestored        // a restore asked for the profile (on this server or another)
	causeShutdown        // Node.Close
	causeGameRelease     // the game called Release (no Kick)

	// Ends.
	causeReleased       // the release landed
	causeTaken          // a write found the lock held by another session
	causeLeaseLapsed    // this server's presence lease lapsed: fenced
	causeLockAged       // the lock went unrefreshed for LockTTL: fenced
	causeWiped          // Driver.Wipe erased the record
	causeRecordGone     // the record vanished while held
	causeRecordCorrupt  // a field the scripts rely on was broken by another tool
	causeCallbackFailed // a game callback panicked halfway through a change
	causeClosed         // the Node closed before a release landed, or a load gave up
)

// String is the word the log uses for c.
func (c cause) String() string {
	if k := c.kick(); k != 0 {
		return k.String()
	}
	switch c {
	case causeGameRelease:
		return "released_by_game"
	case causeReleased:
		return "released"
	case causeClosed:
		return "closed"
	}
	return "none"
}

// kick is the KickReason the game hears for c (0: none).
func (c cause) kick() KickReason {
	switch c {
	case causeJoinedElsewhere:
		return ReasonJoinedElsewhere
	case causeRestored:
		return ReasonRestored
	case causeShutdown:
		return ReasonShutdown
	case causeTaken:
		return ReasonLockLost
	case causeLeaseLapsed, causeLockAged:
		return ReasonFenced
	case causeWiped:
		return ReasonWiped
	case causeRecordGone:
		return ReasonRecordGone
	case causeRecordCorrupt:
		return ReasonRecordCorrupt
	case causeCallbackFailed:
		return ReasonCallbackFailed
	}
	return 0
}

// lost reports whether a session that ends with c loses its lock: its
// progress since the last landed save is not written, and the game hears
// of it through OnLockLost (and the lock-loss metric).
func (c cause) lost() bool {
	switch c {
	case causeTaken, causeLeaseLapsed, causeLockAged, causeWiped, causeRecordGone, causeRecordCorrupt:
		return true
	}
	return false
}

// loss is the lock-loss metric's reason for c (lost must be true).
func (c cause) loss() telemetry.LossReason {
	switch c {
	case causeLeaseLapsed:
		return telemetry.LossLeaseLapsed
	case causeLockAged:
		return telemetry.LossAged
	case causeWiped:
		return telemetry.LossWiped
	case causeRecordGone:
		return telemetry.LossRecordGone
	case causeRecordCorrupt:
		return telemetry.LossRecordCorrupt
	}
	return telemetry.LossTaken
}

// holdsLock reports whether the lock may still be this server's after a
// session ended with c, so that it must be given back: the session ended
// without a release (fenced, a panic, a corrupt record a save refused, a
// Node that closed), and nobody else is known to hold it.
func (c cause) holdsLock() bool {
	switch c {
	case causeLeaseLapsed, causeLockAged, causeCallbackFailed, causeRecordCorrupt, causeClosed:
		return true
	}
	return false
}

// askedFor is the leave cause of a session that another load asks for:
// a restore's (purpose messaging.PurposeRestore) or a join's (any other).
func askedFor(purpose string) cause {
	if purpose == messaging.PurposeRestore {
		return causeRestored
	}
	return causeJoinedElsewhere
}
