package datadriver

import (
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/record"
)

// Errors returned by this package, for errors.Is; most come wrapped with
// the key and the operation (the README's error table says when each comes).
var (
	ErrLocked        = errors.New("profile is locked by another session") // the load did not wait, or gave up (*LockedError)
	ErrLockLost      = errors.New("profile lock lost")                    // the session ended without its progress since the last landed save
	ErrWaitTimeout   = errors.New("timed out waiting for the profile lock")
	ErrCorruptRecord = errors.New("corrupt profile record") // never overwritten (*CorruptRecordError names the field)
	ErrTooLarge      = errors.New("profile data too large") // over MaxDataBytes or MaxMessageBytes: nothing written
	ErrClosed        = errors.New("playerdata node closed")
	ErrClosing       = errors.New("playerdata node shutting down") // Close began: no new session (matches ErrClosed too)
	ErrBusDown       = errors.New("playerdata node's bus is down")
	// errClosing is what a load answers once Close began.
	errClosing          = fmt.Errorf("%w (%w)", ErrClosing, ErrClosed)
	ErrDuplicateDriver  = errors.New("duplicate driver name")
	ErrReleased         = errors.New("profile released")
	ErrInvalidKey       = errors.New("invalid profile key") // empty, over 512 bytes, not UTF-8, or control characters
	ErrInvalidConfig    = errors.New("invalid config")
	ErrNoVersion        = errors.New("no kept version at that time")
	ErrFenced           = errors.New("server fenced off: it cannot prove it still holds its locks") // with ErrLockLost
	ErrSchemaTooNew     = errors.New("profile record needs a newer schema version")                 // refused at once, untouched
	ErrMigration        = errors.New("profile migration failed")                                    // *MigrationError
	ErrCallbackPanic    = errors.New("game callback panicked")                                      // recovered (*PanicError)
	ErrInboxFull        = errors.New("profile inbox is full")
	ErrNotReplicated    = errors.New("write not acknowledged by enough replicas")   // it stands, but an acquisition's lock is given back
	ErrJobIDInUse       = errors.New("JobID in use by another live server process") // *JobIDInUseError
	ErrRedisUnavailable = errors.New("redis unavailable")
	ErrEvictionPolicy   = errors.New("redis may evict the library's keys (maxmemory-policy allkeys-*)") // NewNode unless AcceptEviction; Healthy

	// Trades (docs/trades.md): invalid (nothing written), aborted before the
	// commit (nothing changed), or its commit's answer lost (all or none once
	// Redis answers; meanwhile Update answers ErrTradePending).
	ErrInvalidTrade        = errors.New("invalid trade")
	ErrTradeAborted        = errors.New("trade aborted")
	ErrTradeOutcomeUnknown = errors.New("trade outcome unknown")
	ErrTradePending        = errors.New("profile has a pending trade")

	// A keyed Send (SendOptions.IdempotencyKey) refused, nothing stored: the
	// key names another message (*IdempotencyConflictError), or the profile
	// remembers MaxIdempotencyKeys keys none of which it may forget yet.
	ErrIdempotencyConflict    = errors.New("idempotency key names another message")
	ErrTooManyIdempotencyKeys = errors.New("profile remembers too many idempotency keys")
)

// JobIDInUseError names the process that holds a JobID. It matches
// ErrJobIDInUse with errors.Is.
type JobIDInUseError struct {
	JobID     string    // the JobID asked for
	Instance  string    // the presence instance of the process beating it ("" for a build without instance ids)
	ExpiresAt time.Time // when its last beat seen expires (Redis clock)
}

// Error implements error.
func (e *JobIDInUseError) Error() string {
	who := "instance " + e.Instance
	if e.Instance == "" {
		who = "a server without an instance id (an older build)"
	}
	return fmt.Sprintf("JobID %q is in use: %s beats it; give every running process its own JobID", e.JobID, who)
}

// Is makes errors.Is(err, ErrJobIDInUse) true.
func (e *JobIDInUseError) Is(target error) bool { return target == ErrJobIDInUse }

// LockedError describes the lock that stopped a load. It matches ErrLocked
// with errors.Is.
type LockedError struct {
	Key      string        // the profile key
	Holder   string        // JobID of the server holding the lock
	Age      time.Duration // time since the holder last acquired or saved (Redis clock)
	Presence bool          // the lock carries the presence flag (its holder beats presence)
	Local    bool          // the holder is a session on this very Node
}

// Error implements error.
func (e *LockedError) Error() string {
	where := "server " + e.Holder
	if e.Local {
		where = "this server (" + e.Holder + ")"
	}
	return fmt.Sprintf("profile %q is locked by %s (lock age %s, presence %t)",
		e.Key, where, e.Age.Round(time.Millisecond), e.Presence)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockedError describes lock l of key; local when it is held by a session
// on this very Node.
func lockedError(key string, l record.Lock, local bool) *LockedError {
	return &LockedError{Key: key, Holder: l.Job, Age: l.Age, Presence: l.Presence, Local: local}
}

// IdempotencyConflictError says what a refused Send's IdempotencyKey names
// already. It matches ErrIdempotencyConflict with errors.Is; nothing was
// stored.
type IdempotencyConflictError struct {
	Key, IdempotencyKey string        // the refused Send's profile key and idempotency key
	Driver, Owner       string        // the driver and profile key the key's message was sent to
	MessageID           string        // the first message's id when it is Key's own (another body); else ""
	SameBody            bool          // the other profile's message has this Send's body
	Window              time.Duration // IdempotencyWindow, within which a key names one message of the namespace
}

// OtherProfile reports whether the key names a message of another profile
// (or driver) rather than another body's message of this one.
func (e *IdempotencyConflictError) OtherProfile() bool { return e.MessageID == "" }

// Error implements error.
func (e *IdempotencyConflictError) Error() string {
	if !e.OtherProfile() {
		return fmt.Sprintf("send %q: %v: idempotency key %q names message %s, sent with another body; nothing stored",
			e.Key, ErrIdempotencyConflict, e.IdempotencyKey, e.MessageID)
	}
	body := "another body"
	if e.SameBody {
		body = "the same body"
	}
	return fmt.Sprintf("send %q: %v: idempotency key %q names a message sent to %q of driver %s (with %s) within "+
		"IdempotencyWindow (%s); a key names one message of the namespace; nothing stored", e.Key,
		ErrIdempotencyConflict, e.IdempotencyKey, e.Owner, e.Driver, body, e.Window)
}

// Is makes errors.Is(err, ErrIdempotencyConflict) true.
func (e *IdempotencyConflictError) Is(target error) bool { return target == ErrIdempotencyConflict }

// CorruptRecordError says why a record could not be used. It matches
// ErrCorruptRecord with errors.Is.
type CorruptRecordError struct {
	Key  string
	Path string // the stored field (e.g. `Items["axe"].Count`, "ver", "lock.at", "inbox"); "" when not one field
	Err  error  // the decode error, or what is wrong with the field and the command that repairs it
}

// Error implements error.
func (e *CorruptRecordError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("profile %q: corrupt record at %s: %v", e.Key, e.Path, e.Err)
	}
	return fmt.Sprintf("profile %q: corrupt record: %v", e.Key, e.Err)
}

// Is makes errors.Is(err, ErrCorruptRecord) true.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorruptRecord }

// Unwrap returns the decode error.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// MigrationError says which migration refused a record. It matches
// ErrMigration, and ErrCallbackPanic when the migration panicked.
type MigrationError struct {
	Key   string
	Index int   // Config.Migrations[Index] failed (upgrading to version Index+1)
	Err   error // what Apply returned, or the panic
}

// Error implements error.
func (e *MigrationError) Error() string {
	return fmt.Sprintf("profile %q: migration %d (to schema version %d) failed: %v", e.Key, e.Index, e.Index+1, e.Err)
}

// Is makes errors.Is(err, ErrMigration) true, and errors.Is(err,
// ErrCallbackPanic) when the migration panicked.
func (e *MigrationError) Is(target error) bool {
	var pe *datacodec.PanicError
	return target == ErrMigration || (target == ErrCallbackPanic && errors.As(e.Err, &pe))
}

// Unwrap returns the migration's error.
func (e *MigrationError) Unwrap() error { return e.Err }

// PanicError is a game callback's recovered panic. It matches
// ErrCallbackPanic.
type PanicError struct {
	Callback string // which callback: "Update", "Kick", "OnRelease", ...
	Value    any    // what it panicked with
	Stack    []byte // the goroutine's stack at the panic
}

// Error implements error (without the stack, which is logged).
func (e *PanicError) Error() string {
	return fmt.Sprintf("%s panicked: %v", e.Callback, e.Value)
}

// Is makes errors.Is(err, ErrCallbackPanic) true.
func (e *PanicError) Is(target error) bool { return target == ErrCallbackPanic }

// Errors of a move (Profile.MoveTo).
var (
	// ErrMoved: the session moved to another server (Profile.MoveTo
	// answered nil): Err matches it once Done is closed, and Update answers
	// it. *MovedError names the server.
	ErrMoved = errors.New("profile moved to another server")
	// ErrMoveRefused: the target did not take the move; the session is
	// still live here, nothing lost. *MoveRefusedError says why.
	ErrMoveRefused = errors.New("move refused")
)

// MovedError is the end of a session that moved: it matches ErrMoved.
type MovedError struct {
	Key string // the profile's key
	To  string // the JobID of the server holding it now
	ID  string // the move's id (playerdata inspect shows the record's last)
}

// Error implements error.
func (e *MovedError) Error() string {
	return fmt.Sprintf("%q: %v to server %s (move %s)", e.Key, ErrMoved, e.To, e.ID)
}

// Is makes errors.Is(err, ErrMoved) true.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// MoveRefusal is why a move's target refused it.
type MoveRefusal string

// The refusals of a move.
const (
	RefusedNotAlive     MoveRefusal = "not-alive"      // the target's presence reads stopped
	RefusedNotAddressed MoveRefusal = "not-addressed"  // the prepare names another server
	RefusedNoDriver     MoveRefusal = "no-driver"      // the target runs no driver of that name
	RefusedClosing      MoveRefusal = "closing"        // the target's Node is closing (matches ErrClosing)
	RefusedHeld         MoveRefusal = "held"           // the target has the key already (a session, a load)
	RefusedBusy         MoveRefusal = "busy"           // another move of the key is pending there
	RefusedExpired      MoveRefusal = "expired"        // the prepare's expiry passed (or is out of bounds)
	RefusedUnsigned     MoveRefusal = "unsigned"       // the target has a RequestKey and the prepare was not signed
	RefusedNoLease      MoveRefusal = "no-lease"       // the target holds no presence lease (ErrFenced)
	RefusedSchema       MoveRefusal = "schema-too-new" // the target cannot read the data (ErrSchemaTooNew)
	RefusedBadData      MoveRefusal = "bad-data"       // the data does not decode at the target
)

// MoveRefusedError is a move its target did not take: it matches
// ErrMoveRefused, and ErrClosing, ErrFenced or ErrSchemaTooNew for those
// refusals.
type MoveRefusedError struct {
	Key, Target string
	Reason      MoveRefusal
	Why         string // the target's words, if any
}

// Error implements error.
func (e *MoveRefusedError) Error() string {
	s := fmt.Sprintf("move %q to %s: %v: %s", e.Key, e.Target, ErrMoveRefused, e.Reason)
	if e.Why != "" {
		s += ": " + e.Why
	}
	return s
}

// Is makes errors.Is match ErrMoveRefused and the sentinel of the reason.
func (e *MoveRefusedError) Is(target error) bool {
	switch target {
	case ErrMoveRefused:
		return true
	case ErrClosing, ErrClosed:
		return e.Reason == RefusedClosing
	case ErrFenced:
		return e.Reason == RefusedNoLease
	case ErrSchemaTooNew:
		return e.Reason == RefusedSchema
	}
	return false
}
