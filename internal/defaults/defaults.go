// Package defaults holds the defaults and limits of datadriver's Config and
// NodeConfig, each with its reason, so that the CLI, the simulation and the
// benchmarks use the values a Node uses without datadriver exporting them
// (its field docs state each value).
package defaults

import "time"

// Defaults of the Config fields.
const (
	MoveHold     = 30 * time.Second  // a redirected client reconnects in seconds; a lost one frees the profile soon
	LockWait     = 15 * time.Second  // a holder ends a stale session and saves, or a crashed one is proven stopped (10 to 15 s)
	LockTTL      = 180 * time.Second // age after which a lock without the presence flag is stale
	LockSkew     = 60 * time.Second  // margin on LockTTL for a failover whose clock differs
	Autosave     = 30 * time.Second  // a crash loses at most this much progress
	History      = 24                // with HistoryEvery, a day of play
	HistoryEvery = time.Hour         // a day back in History versions; an hour-old mistake undone
	// HistoryBytesPerData is HistoryBytes's default as a multiple of
	// MaxDataBytes: the default day of versions of a profile takes about one
	// compressed copy and its deltas, a fraction of this, and a big profile
	// kept in many versions stays within this multiple of its size.
	HistoryBytesPerData = 8
	MaxInbox            = 1000           // messages are gifts and grants, not a queue
	MaxMessageBytes     = 64 << 10       // a message is a gift or a grant, not a profile
	MaxMessageAttempts  = 5              // rides out a passing failure; a message that never applies stops costing pulls
	IdempotencyWindow   = 24 * time.Hour // a shop retries within minutes, a batch job within a day
	MaxIdempotencyKeys  = 10 * MaxInbox  // a key per message waiting, and the day's applied ones
	MaxDataBytes        = 4 << 20        // far under Redis's 512 MiB; a profile that large is a bug
)

// Defaults of the NodeConfig fields.
const (
	SaveTimeout        = 10 * time.Second // one stuck save never holds up the others
	ReplicaTimeout     = time.Second      // a replica on the same network answers in milliseconds
	MaxConcurrentSaves = 16               // autosaves of one Node at once
	SoloCalls          = 8                // a few callers never wait for a pipeline; many share round trips
	PingTimeout        = 2 * time.Second  // a healthy Redis answers in a millisecond; say so at once if not
)

// Limits of the Config fields and of profile keys.
const (
	MaxHistory   = 1000 // the most versions History may keep
	MaxKeyBytes  = 512  // a profile key travels in every handoff message, whose size is limited
	MaxNameBytes = 128  // a driver Name is in every key and subject
)
