package telemetry

import (
	"github.com/ckernel/playerdata/internal/enum"
	"go.opentelemetry.io/otel/attribute"
)

// Attribute keys of this package. Metric attributes take their values only
// from the typed enums below and from driver names (a Node's profile kinds,
// fixed at start-up), so their cardinality is bounded by construction: no
// method that records a metric takes a player key, a token or any other free
// string. Player keys appear on spans only (KeyKey).
const (
	// DriverKey names the driver (the profile kind, Config.Name) on metrics
	// and spans.
	DriverKey = attribute.Key("playerdata.driver")
	// KeyKey is the profile's key (a player id) on spans. Never on a metric.
	KeyKey = attribute.Key("playerdata.key")
	// JobKey is the JobID of the server that made a span.
	JobKey = attribute.Key("playerdata.job")
	// HolderKey is the JobID of the server holding a lock, on the spans of
	// acquire attempts, presence reads and takeover decisions.
	HolderKey = attribute.Key("playerdata.lock.holder")
	// PeerKey is the JobID of the other server of a handoff message: the
	// one a sent message goes to, or the one a received message came from.
	PeerKey = attribute.Key("playerdata.peer")
	// WaitKey marks a join that waited. It is true from the start on the
	// span that KeepWaits (package playerdata/sampling) always samples, and
	// set on a sampled join span once it waits.
	WaitKey = attribute.Key("playerdata.wait")
	// WaitOnKey says what a join waited on (WaitOn).
	WaitOnKey = attribute.Key("playerdata.wait.on")
	// JoinPathKey is how a join got its lock (JoinPath).
	JoinPathKey = attribute.Key("playerdata.join.path")
	// JoinOutcomeKey is how a join ended (JoinOutcome).
	JoinOutcomeKey = attribute.Key("playerdata.join.outcome")
	// MoveOutcomeKey is how a move ended (MoveOutcome).
	MoveOutcomeKey = attribute.Key("playerdata.move.outcome")
	// WriteKindKey is what a write was for (WriteKind).
	WriteKindKey = attribute.Key("playerdata.write.kind")
	// WriteOutcomeKey is how a write ended (WriteOutcome).
	WriteOutcomeKey = attribute.Key("playerdata.write.outcome")
	// LossReasonKey is why a session lost its lock (LossReason).
	LossReasonKey = attribute.Key("playerdata.loss.reason")
	// TakeoverKey is how a lock was taken from another holder (TakeoverHow).
	TakeoverKey = attribute.Key("playerdata.takeover.how")
	// HandoffMessageKey is the kind of a handoff message (HandoffMessage).
	HandoffMessageKey = attribute.Key("playerdata.handoff.message")
	// SendOutcomeKey is how a profile message send ended (SendOutcome).
	SendOutcomeKey = attribute.Key("playerdata.message.outcome")
	// ProfileStateKey is live or retained on the profiles gauge.
	ProfileStateKey = attribute.Key("playerdata.profile.state")
	// DropReasonKey is why the bus dropped a message (DropReason).
	DropReasonKey = attribute.Key("playerdata.drop.reason")
	// RedisPolicyKey is Redis's maxmemory-policy (playerdata.redis.eviction).
	RedisPolicyKey = attribute.Key("playerdata.redis.maxmemory_policy")
	// BusEventKey is a bus connection event: disconnect, reconnect, close.
	BusEventKey = attribute.Key("playerdata.bus.event")
	// AcquireOutcomeKey is what an acquire attempt met (AcquireOutcome).
	AcquireOutcomeKey = attribute.Key("playerdata.acquire.outcome")
	// PresenceStatusKey is what a presence read found (PresenceStatus).
	PresenceStatusKey = attribute.Key("playerdata.presence.status")
	// PresenceExpiresKey is, on a presence read that found the holder
	// alive, how long until its beat can expire, in seconds.
	PresenceExpiresKey = attribute.Key("playerdata.presence.expires_in")
	// FencedSessionsKey is the number of sessions a fence ended, on its
	// span event.
	FencedSessionsKey = attribute.Key("playerdata.fence.sessions")
	// HistoryTrimKey is why kept versions were trimmed: "count" (History)
	// or "bytes" (HistoryBytes).
	HistoryTrimKey = attribute.Key("playerdata.history.trim")

	// errorTypeKey is OTel's error.type: the class of a failure, here the
	// outcome's name.
	errorTypeKey = attribute.Key("error.type")
)

// label names an enum value by its attribute value, from names (in value
// order); "invalid" out of range.
func label[E ~uint8](v E, names ...string) string {
	if name, ok := enum.Name(v, names...); ok {
		return name
	}
	return "invalid"
}

// JoinPath is how a join came by its lock.
type JoinPath uint8

const (
	// JoinFree: the lock was free (or already this server's) at the first
	// attempt; nobody was waited on.
	JoinFree JoinPath = iota
	// JoinSameServer: the join waited for a load, save or leave of the same
	// key on this server (or ended its own live session there).
	JoinSameServer
	// JoinAdopted: the join adopted this server's retained profile (a leave
	// save had failed), with no wait.
	JoinAdopted
	// JoinHandoff: the join waited on another server's lock, which that
	// server let go (a release request, or its own leave).
	JoinHandoff
	// JoinTakeover: the join took the lock from another holder without its
	// release: proven stopped, stale by age, or an earlier run of this JobID.
	JoinTakeover
	joinPaths
)

// String is the attribute value.
func (p JoinPath) String() string {
	return label(p, "free", "same_server", "adopted", "handoff", "takeover")
}

// JoinOutcome is how a join ended.
type JoinOutcome uint8

const (
	// JoinLoaded: the profile was handed out.
	JoinLoaded JoinOutcome = iota
	// JoinRefused: the wait ran out and the join failed closed
	// (ErrWaitTimeout, or ErrLocked for a load that does not wait).
	JoinRefused
	// JoinFailed: any other error (backend, corrupt record, fenced).
	JoinFailed
	// JoinCancelled: the caller's context ended, or the driver shut down.
	JoinCancelled
	joinOutcomes
)

// String is the attribute value.
func (o JoinOutcome) String() string {
	return label(o, "loaded", "refused", "failed", "cancelled")
}

// MoveOutcome is how a move (Profile.MoveTo) ended.
type MoveOutcome uint8

const (
	// MoveLanded: the flip landed; the target holds the profile.
	MoveLanded MoveOutcome = iota
	// MoveRefused: the target did not take it (ErrMoveRefused); the
	// session is still live here.
	MoveRefused
	// MoveFailed: any other error before the flip (a fence, a pending
	// trade, Redis or NATS); the session is live here unless it ended.
	MoveFailed
	// MoveCancelled: the caller's context ended before the flip.
	MoveCancelled
	moveOutcomes
)

// String is the attribute value.
func (o MoveOutcome) String() string {
	return label(o, "moved", "refused", "failed", "cancelled")
}

// WriteKind is what a write of a record (one save.lua call) was for.
type WriteKind uint8

const (
	// WriteSave is Profile.Save.
	WriteSave WriteKind = iota
	// WriteAutosave is the background save.
	WriteAutosave
	// WriteRelease is the leave save (data written and lock cleared), from
	// Release, a release request, a shutdown, or a retry of a retained
	// profile.
	WriteRelease
	// WriteRefresh rewrites only the lock's timestamp (LockTTL keep-alive).
	WriteRefresh
	// WriteAdopt is the save of a rejoin that adopts a retained profile.
	WriteAdopt
	// WriteGiveBack releases a lock no profile uses (fenced session, failed
	// load) without writing data.
	WriteGiveBack
	writeKinds
)

// String is the attribute value.
func (k WriteKind) String() string {
	return label(k, "save", "autosave", "release", "refresh", "adopt", "give_back")
}

// WriteOutcome is how a write ended.
type WriteOutcome uint8

const (
	// WriteOK: it landed.
	WriteOK WriteOutcome = iota
	// WriteLockLost: refused because another server holds the lock (or this
	// one fenced itself off).
	WriteLockLost
	// WriteTooLarge: the data exceeded MaxDataBytes; nothing was sent.
	WriteTooLarge
	// WriteTradePending: refused because a trade holds the record.
	WriteTradePending
	// WriteTimeout: SaveTimeout or the caller's deadline ran out.
	WriteTimeout
	// WriteError: any other failure (connection, Redis error, encoding).
	WriteError
	writeOutcomes
)

// String is the attribute value.
func (o WriteOutcome) String() string {
	return label(o, "ok", "lock_lost", "too_large", "trade_pending", "timeout", "error")
}

// LossReason is why a session ended with ErrLockLost.
type LossReason uint8

const (
	// LossTaken: a write found the lock held by another server
	// (Kick reason ReasonLockLost).
	LossTaken LossReason = iota
	// LossLeaseLapsed: this server's presence lease lapsed (its beats went
	// unacknowledged), so it fenced the session off (ReasonFenced).
	LossLeaseLapsed
	// LossAged: the lock was not refreshed for LockTTL, so the session was
	// fenced off before another server could take it by age (ReasonFenced).
	LossAged
	// LossWiped: the record was erased (Driver.Wipe; ReasonWiped).
	LossWiped
	// LossRecordGone: the record vanished while held (deleted by another
	// tool, flushed or evicted; ReasonRecordGone).
	LossRecordGone
	// LossRecordCorrupt: a field the scripts rely on was changed to
	// something this library does not write (ReasonRecordCorrupt).
	LossRecordCorrupt
	lossReasons
)

// String is the attribute value.
func (r LossReason) String() string {
	return label(r, "taken", "lease_lapsed", "aged", "wiped", "record_gone", "record_corrupt")
}

// TakeoverHow is how a lock was taken from a holder that did not release
// it (record.Taken's stolen, expired and own).
type TakeoverHow uint8

const (
	// TakeoverStopped: the holder was proven stopped by two stopped
	// presence reads a beat apart (record.TakenStolen).
	TakeoverStopped TakeoverHow = iota
	// TakeoverAged: the lock was older than LockTTL + LockSkew and its
	// holder did not read alive, or it had no presence flag
	// (record.TakenExpired).
	TakeoverAged
	// TakeoverOwnRun: the lock was left by an earlier run of this JobID
	// (record.TakenOwn).
	TakeoverOwnRun
	takeoverHows
)

// String is the attribute value.
func (h TakeoverHow) String() string {
	return label(h, "stopped", "aged", "own_run")
}

// HandoffMessage is the kind of a message between servers (the Node
// translates messaging.Type to it).
type HandoffMessage uint8

const (
	// MsgRequest is a release request (messaging.TypeRequest).
	MsgRequest HandoffMessage = iota
	// MsgReply is "I no longer hold this key" (messaging.TypeReply).
	MsgReply
	// MsgNotify is "pull the inbox of this key" (messaging.TypeNotify).
	MsgNotify
	handoffMessages

	// MsgOther is a message of another type: nothing counts it.
	MsgOther = handoffMessages
)

// String is the attribute value.
func (m HandoffMessage) String() string {
	return label(m, "request", "reply", "notify")
}

// SendOutcome is how Driver.Send of a profile message ended.
type SendOutcome uint8

const (
	// SendOK: the message was stored in the profile's inbox (or applied).
	SendOK SendOutcome = iota
	// SendInboxFull: refused with ErrInboxFull.
	SendInboxFull
	// SendFailed: any other error.
	SendFailed
	// SendDuplicate: an earlier send with the same idempotency key stored
	// the message; nothing new was stored.
	SendDuplicate
	// SendKeyConflict: refused with ErrIdempotencyConflict.
	SendKeyConflict
	// SendKeysFull: refused with ErrTooManyIdempotencyKeys.
	SendKeysFull
	sendOutcomes
)

// String is the attribute value.
func (o SendOutcome) String() string {
	return label(o, "ok", "inbox_full", "failed", "duplicate", "key_conflict", "keys_full")
}

// DropReason is why a message that reached this server was dropped.
type DropReason uint8

const (
	// DropMalformed: not a well-formed wire message (messaging.ErrMalformed).
	DropMalformed DropReason = iota
	// DropTooLarge: over the size limit (messaging.ErrTooLarge).
	DropTooLarge
	// DropUnknownType: a type this build does not know
	// (messaging.ErrUnknownType).
	DropUnknownType
	// DropUnauthenticated: refused by a bus with a key
	// (messaging.Stats.DroppedUnauthenticated).
	DropUnauthenticated
	// DropUnknownDriver: for a driver this server does not run
	// (lockhandoff.Stats.DroppedUnknownDriver).
	DropUnknownDriver
	// DropReplayed: a signed message delivered once already within the
	// replay window (messaging.Stats.DroppedReplayed).
	DropReplayed
	// DropBacklog: dropped by the NATS client while the handler was behind
	// (messaging.Stats.DroppedBacklog).
	DropBacklog
	// DropUnwaited: a reply naming a key no join of this server waits on
	// (lockhandoff.Stats.DroppedUnwaited).
	DropUnwaited
	dropReasons
)

// String is the attribute value.
func (r DropReason) String() string {
	return label(r, "malformed", "too_large", "unknown_type", "unauthenticated", "unknown_driver",
		"replayed", "backlog", "unwaited")
}

// WaitOn is what a join waits on.
type WaitOn uint8

const (
	// WaitSameServer: a load, save or leave of the key on this server.
	WaitSameServer WaitOn = iota
	// WaitOtherServer: another server's lock.
	WaitOtherServer
	waitOns
)

// String is the attribute value.
func (w WaitOn) String() string {
	return label(w, "same_server", "other_server")
}

// AcquireOutcome is what one acquire attempt (acquire.lua) met.
type AcquireOutcome uint8

const (
	// AcquireTaken: the lock is now this server's (free, new, its own, or
	// taken over).
	AcquireTaken AcquireOutcome = iota
	// AcquireLocked: another server holds it.
	AcquireLocked
	// AcquireTooNew: the record's format is newer than this build's.
	AcquireTooNew
	// AcquireError: the call failed.
	AcquireError
	acquireOutcomes
)

// String is the attribute value.
func (o AcquireOutcome) String() string {
	return label(o, "taken", "locked", "too_new", "error")
}

// PresenceStatus is what a presence read found (the Node translates
// presence.Status to it).
type PresenceStatus uint8

const (
	// PresenceUnknown: the read failed, or a missing beat is no proof yet.
	PresenceUnknown PresenceStatus = iota
	// PresenceAlive: the holder beat within the TTL.
	PresenceAlive
	// PresenceStopped: no live beat for a full TTL.
	PresenceStopped
	presenceStatuses
)

// String is the attribute value.
func (s PresenceStatus) String() string {
	return label(s, "unknown", "alive", "stopped")
}

// BusEvent is a change of the bus's connection.
type BusEvent uint8

const (
	// BusDisconnect: the connection was lost; until it is back, requests to
	// this server go unanswered.
	BusDisconnect BusEvent = iota
	// BusReconnect: the connection is back.
	BusReconnect
	// BusClose: the connection closed for good.
	BusClose
	busEventCount
)

// String is the attribute value.
func (e BusEvent) String() string {
	return label(e, "disconnect", "reconnect", "close")
}
