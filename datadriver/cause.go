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
	causeWipeAsked       // a wipe asked for the profile (its release lands, then the record is erased)
	causeShutdown        // Node.Close
	causeGameRelease     // the game called Release (no Kick)
	causeMoveUnclaimed   // a moved profile's player did not join within MoveHold (no Kick)

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
	causeMoved          // MoveTo's flip landed: another server holds it (no Kick)
)

// causeInfo is everything derived from a cause: one row per cause in
// info, so that a new cause is one edit.
type causeInfo struct {
	// kick is the KickReason the game hears (0: none).
	kick KickReason
	// word is the log's word for a cause without a Kick.
	word string
	// lost: a session that ends so loses its lock: its progress since the
	// last landed save is not written, and the game hears of it through
	// OnLockLost (and the lock-loss metric, with reason loss).
	lost bool
	loss telemetry.LossReason
	// holdsLock: the lock may still be this server's after the session
	// ended so, so it must be given back: the session ended without a
	// release (fenced, a panic, a corrupt record a save refused, a Node that
	// closed), and nobody else is known to hold it.
	holdsLock bool
}

// info is c's row of the table of causes.
func (c cause) info() causeInfo {
	switch c {
	case causeJoinedElsewhere:
		return causeInfo{kick: ReasonJoinedElsewhere}
	case causeRestored:
		return causeInfo{kick: ReasonRestored}
	case causeWipeAsked:
		return causeInfo{kick: ReasonWiped}
	case causeShutdown:
		return causeInfo{kick: ReasonShutdown}
	case causeGameRelease:
		return causeInfo{word: "released_by_game"}
	case causeReleased:
		return causeInfo{word: "released"}
	case causeTaken:
		return causeInfo{kick: ReasonLockLost, lost: true, loss: telemetry.LossTaken}
	case causeLeaseLapsed:
		return causeInfo{kick: ReasonFenced, lost: true, loss: telemetry.LossLeaseLapsed, holdsLock: true}
	case causeLockAged:
		return causeInfo{kick: ReasonFenced, lost: true, loss: telemetry.LossAged, holdsLock: true}
	case causeWiped:
		return causeInfo{kick: ReasonWiped, lost: true, loss: telemetry.LossWiped}
	case causeRecordGone:
		return causeInfo{kick: ReasonRecordGone, lost: true, loss: telemetry.LossRecordGone}
	case causeRecordCorrupt:
		return causeInfo{kick: ReasonRecordCorrupt, lost: true, loss: telemetry.LossRecordCorrupt, holdsLock: true}
	case causeCallbackFailed:
		return causeInfo{kick: ReasonCallbackFailed, holdsLock: true}
	case causeClosed:
		return causeInfo{word: "closed", holdsLock: true}
	case causeMoved:
		return causeInfo{word: "moved"}
	case causeMoveUnclaimed:
		return causeInfo{word: "move_unclaimed"}
	}
	return causeInfo{word: "none"}
}

// String is the word the log uses for c: its Kick's, else its own.
func (c cause) String() string {
	if i := c.info(); i.kick != 0 {
		return i.kick.String()
	}
	return c.info().word
}

// kick is the KickReason the game hears for c (0: none).
func (c cause) kick() KickReason { return c.info().kick }

// lost reports whether a session that ends with c loses its lock.
func (c cause) lost() bool { return c.info().lost }

// loss is the lock-loss metric's reason for c (lost must be true).
func (c cause) loss() telemetry.LossReason { return c.info().loss }

// holdsLock reports whether the lock may still be this server's after a
// session ended with c, so that it must be given back.
func (c cause) holdsLock() bool { return c.info().holdsLock }

// askedFor is the leave cause of a session that another load asks for: a
// restore's (purpose messaging.PurposeRestore), a wipe's
// (messaging.PurposeWipe) or a join's (any other).
func askedFor(purpose string) cause {
	switch purpose {
	case messaging.PurposeRestore:
		return causeRestored
	case messaging.PurposeWipe:
		return causeWipeAsked
	}
	return causeJoinedElsewhere
}
