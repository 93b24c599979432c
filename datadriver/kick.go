package datadriver

import "fmt"

// KickReason says why the driver ended a live session by itself
// (Config.Kick). Its String is a stable identifier for logs, metrics and
// the game's own messages; Message is a sentence a game may show as is.
//
// A session hears at most one Kick: when it stops being playable. The
// reason says why it stopped, not whether its last changes were saved:
// Profile.Err says that once Done closes (ErrReleased: everything the game
// changed was saved; ErrLockLost: progress since the last landed save is
// lost). A session the game itself releases hears no Kick.
type KickReason int

// The kick reasons, one per cause.
const (
	// ReasonJoinedElsewhere: the player joined another server (or another
	// session on this one), which asked for the profile. The driver runs the
	// leave cleanups and the release save; the new server loads it once that
	// save lands.
	ReasonJoinedElsewhere KickReason = iota + 1
	// ReasonLockLost: another server took the profile's lock; progress after
	// the last landed save cannot be kept.
	ReasonLockLost
	// ReasonFenced: this server lost contact with its data store (its
	// presence lease lapsed, or the lock went unrefreshed for LockTTL) and
	// ended the session before another server could take the lock; progress
	// after the last landed save is lost.
	ReasonFenced
	// ReasonWiped: the profile's record was erased (Driver.Wipe).
	ReasonWiped
	// ReasonShutdown: this server is shutting down (Node.Close); the game
	// can send the player to another server, where the profile loads at
	// once once its save lands.
	ReasonShutdown
	// ReasonCallbackFailed: a game callback (Update's function, a message
	// handler) panicked on the profile; the session ended without the half
	// made change, and the profile keeps its last landed save.
	ReasonCallbackFailed
	// ReasonRecordGone: the profile's record vanished from Redis while the
	// session held it (deleted by another tool, flushed, or evicted):
	// progress since the last landed save is lost, and what the record held
	// too unless a kept version restores it.
	ReasonRecordGone
	// ReasonRecordCorrupt: a field of the profile's record that the library
	// relies on was changed to something it does not write (by another
	// tool): the session ended without writing over it; progress since the
	// last landed save is lost. The next join refuses the record, naming the
	// field and the command that repairs it.
	ReasonRecordCorrupt
)

// String is the reason's identifier: "joined_elsewhere", "lock_lost",
// "fenced", "wiped", "shutdown", "callback_failed", "record_gone" or
// "record_corrupt".
func (r KickReason) String() string {
	if id, _ := r.text(); id != "" {
		return id
	}
	return fmt.Sprintf("KickReason(%d)", int(r))
}

// Message is a sentence a game may show the player it disconnects.
func (r KickReason) Message() string {
	if _, m := r.text(); m != "" {
		return m
	}
	return "You were disconnected."
}

// text is the reason's identifier and sentence: the one table of them.
func (r KickReason) text() (id, message string) {
	switch r {
	case ReasonJoinedElsewhere:
		return "joined_elsewhere", "You joined another server."
	case ReasonLockLost:
		return "lock_lost", "Your data was loaded on another server."
	case ReasonFenced:
		return "fenced", "This server lost contact with its data store."
	case ReasonWiped:
		return "wiped", "Your data was erased."
	case ReasonShutdown:
		return "shutdown", "This server is shutting down."
	case ReasonCallbackFailed:
		return "callback_failed", "The server hit an error with your data."
	case ReasonRecordGone:
		return "record_gone", "Your saved data could not be found; the server stopped to keep it safe."
	case ReasonRecordCorrupt:
		return "record_corrupt", "Your saved data was changed outside the game; the server stopped to keep it safe."
	}
	return "", ""
}
