package datadriver

import "fmt"

// KickReason says why the driver ended a live session by itself
// (Config.Kick). Its String is a stable identifier for logs, metrics and
// the game's own messages; Message is a sentence a game may show as is.
type KickReason int

// The kick reasons, one per cause.
const (
	// ReasonJoinedElsewhere: the player joined another server (or another
	// session on this one), which asked for the profile; it saved and
	// released it first, so nothing was lost.
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
)

// String is the reason's identifier: "joined_elsewhere", "lock_lost",
// "fenced", "wiped", "shutdown" or "callback_failed".
func (r KickReason) String() string {
	switch r {
	case ReasonJoinedElsewhere:
		return "joined_elsewhere"
	case ReasonLockLost:
		return "lock_lost"
	case ReasonFenced:
		return "fenced"
	case ReasonWiped:
		return "wiped"
	case ReasonShutdown:
		return "shutdown"
	case ReasonCallbackFailed:
		return "callback_failed"
	}
	return fmt.Sprintf("KickReason(%d)", int(r))
}

// Message is a sentence a game may show the player it disconnects.
func (r KickReason) Message() string {
	switch r {
	case ReasonJoinedElsewhere:
		return "You joined another server."
	case ReasonLockLost:
		return "Your data was loaded on another server."
	case ReasonFenced:
		return "This server lost contact with its data store."
	case ReasonWiped:
		return "Your data was erased."
	case ReasonShutdown:
		return "This server is shutting down."
	case ReasonCallbackFailed:
		return "The server hit an error with your data."
	}
	return "You were disconnected."
}
