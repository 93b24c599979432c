package datadriver

import (
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/record"
)

// Errors returned by this package. Test them with errors.Is; several come
// wrapped with the key and operation, and ErrLocked comes as a *LockedError
// carrying the holder.
var (
	// ErrLocked: another server (or another session on this server) holds
	// the key's lock and the load was not allowed to wait, or gave up.
	// The concrete error is a *LockedError.
	ErrLocked = errors.New("profile is locked by another session")

	// ErrLockLost: the profile's lock was taken by another server (a save
	// found another holder's lock, the record was wiped, or this server
	// stopped beating presence and fenced itself). The profile is no longer
	// live; nothing more it holds will be saved.
	ErrLockLost = errors.New("profile lock lost")

	// ErrWaitTimeout: a load waited its whole bound (LockWait, LocalHandoff
	// or HandoffWait) and the holder neither released the lock nor was
	// proven stopped. The record is untouched. The error also wraps the last
	// *LockedError seen.
	ErrWaitTimeout = errors.New("timed out waiting for the profile lock")

	// ErrCorruptRecord: the stored record cannot be decoded into the
	// profile type, or has a format this build does not know. It is never
	// overwritten.
	ErrCorruptRecord = errors.New("corrupt profile record")

	// ErrTooLarge: the encoded profile is larger than MaxDataBytes (or a
	// message larger than MaxMessageBytes). A save or Send writes nothing; a
	// release frees the lock and keeps the last data that fit (see
	// Profile.Release).
	ErrTooLarge = errors.New("profile data too large")

	// ErrClosed: the Node (or driver) is closed.
	ErrClosed = errors.New("playerdata node closed")

	// ErrClosing: the Node is shutting down (Close began; see
	// Node.Closing): it starts no session.
	ErrClosing = errors.New("playerdata node shutting down")

	// ErrBusDown: the Node's NATS connection is down (Node.Healthy), or did
	// not answer NewNode's PING.
	ErrBusDown = errors.New("playerdata node's bus is down")

	// errClosing is what a load answers once Close began: it matches
	// ErrClosing and ErrClosed.
	errClosing = fmt.Errorf("%w (%w)", ErrClosing, ErrClosed)

	// ErrDuplicateDriver: a Node already has a driver with that name.
	ErrDuplicateDriver = errors.New("duplicate driver name")

	// ErrReleased: the profile was released; it is no longer live. Done is
	// closed and Err answers ErrReleased after a clean release.
	ErrReleased = errors.New("profile released")

	// ErrInvalidKey: the key is empty, too long, not UTF-8, or contains
	// control characters.
	ErrInvalidKey = errors.New("invalid profile key")

	// ErrInvalidConfig: a NodeConfig or Config field has an invalid value.
	ErrInvalidConfig = errors.New("invalid config")

	// ErrNoVersion: RestoreAt found no kept version at or before the given
	// time.
	ErrNoVersion = errors.New("no kept version at that time")

	// ErrFenced: this server cannot prove that nobody else can take the
	// lock: its presence lease lapsed (no beat acknowledged for PresenceTTL -
	// FenceMargin: another server may read it as stopped) or the lock was not
	// refreshed for LockTTL (it may be taken by age). A session that ends so
	// has an error matching both ErrLockLost and ErrFenced; a load refused so
	// matches ErrFenced. Nothing was written.
	ErrFenced = errors.New("server fenced off: it cannot prove it still holds its locks")

	// ErrSchemaTooNew: the record was written by a newer build after a
	// schema change this build cannot read: its min-reader is above this
	// driver's schema version (len(Config.Migrations)). The load is refused
	// at once, whoever holds the lock, and the record is left untouched.
	ErrSchemaTooNew = errors.New("profile record needs a newer schema version")

	// ErrMigration: a migration returned an error (or panicked) on the
	// stored data. The load is refused, the record left untouched and its
	// lock given back. The concrete error is a *MigrationError.
	ErrMigration = errors.New("profile migration failed")

	// ErrCallbackPanic: a game callback (Update's function, Kick, OnRelease,
	// OnLockLost, OnSaveError, OnMessage, a trade function, a migration)
	// panicked. The panic was recovered and logged with its stack; the
	// server and its other players go on, and a change half made by the
	// callback never lands. The concrete error is a *PanicError.
	ErrCallbackPanic = errors.New("game callback panicked")

	// ErrInboxFull: Send found MaxInbox messages waiting for the profile
	// already; nothing was stored.
	ErrInboxFull = errors.New("profile inbox is full")

	// ErrTradePending: the record is held by a trade that has not settled.
	ErrTradePending = errors.New("profile has a pending trade")

	// ErrNotReplicated: a release, explicit Save or trade commit landed on
	// the primary, but fewer than NodeConfig.MinReplicas replicas
	// acknowledged it within ReplicaTimeout. The write stands; it can be
	// lost only if the primary fails over before replicating it.
	ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

	// ErrJobIDInUse: NewNode found the JobID's presence alive under another
	// process (it renewed its beat while NewNode waited). The concrete error
	// is a *JobIDInUseError naming that process's instance.
	ErrJobIDInUse = errors.New("JobID in use by another live server process")

	// ErrRedisUnavailable: NewNode's PING was not answered within
	// NodeConfig.PingTimeout.
	ErrRedisUnavailable = errors.New("redis unavailable")
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

// CorruptRecordError says why a record could not be used. It matches
// ErrCorruptRecord with errors.Is.
type CorruptRecordError struct {
	Key string
	// Path names the field that failed to decode, as stored (e.g.
	// `Inventory["sword"].Level`); "" when the failure is not in one field.
	Path string
	Err  error // the decode error, or a description of the bad field
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
