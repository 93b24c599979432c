package datadriver

import "fmt"

// KickReason says why the driver ended a session by itself (Config.Kick):
// String is a stable identifier, Message a sentence to show the player. A
// session hears at most one Kick; Profile.Err says whether its progress was
// saved (ErrReleased) or not (ErrLockLost).
type KickReason int

// The kick reasons, one per cause (Message says each to the player).
const (
	ReasonJoinedElsewhere KickReason = iota + 1 // another server or session asked for the profile; the release saves it
	ReasonLockLost                              // another server took the lock
	ReasonFenced                                // this server lost contact with Redis and stopped first
	ReasonWiped                                 // Driver.Wipe erased the record
	ReasonShutdown                              // Node.Close: send the player elsewhere, the release saves it
	ReasonCallbackFailed                        // a game callback panicked halfway through a change
	ReasonRecordGone                            // the record vanished while held (deleted, flushed, evicted)
	ReasonRecordCorrupt                         // another tool broke a field the library relies on
	ReasonRestored                              // a restore (Driver.RestoreAt, playerdata restore) asked for the profile; the release saves it
)

// String is the reason's identifier: "joined_elsewhere", "lock_lost",
// "fenced", "wiped", "shutdown", "callback_failed", "record_gone",
// "record_corrupt" or "restored".
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
	case ReasonRestored:
		return "restored", "Your data is being restored to an earlier version; join again in a moment."
	}
	return "", ""
}
