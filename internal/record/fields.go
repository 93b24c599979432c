package record

// The fields of a record hash.
const (
	// FieldData is the profile data: an opaque blob (msgpack).
	FieldData = "data"
	// FieldVer is the record version: +1 on every data write.
	FieldVer = "ver"
	// FieldAt is when the data was written (ms, Redis clock).
	FieldAt = "at"
	// FieldEpoch is +1 on every acquisition: the fencing token a caller can
	// hand to other systems.
	FieldEpoch = "epoch"
	// FieldLockJob is the JobID of the server holding the lock ("" when free).
	FieldLockJob = "lock.job"
	// FieldLockToken is the lock token ("" when free).
	FieldLockToken = "lock.token"
	// FieldLockAt is when the lock was taken or last written under (ms, Redis
	// clock).
	FieldLockAt = "lock.at"
	// FieldLockPresence is "1" when the holder beats presence.
	FieldLockPresence = "lock.presence"
	// FieldReleased is the token of the last release.
	FieldReleased = "released"
	// FieldReleasedVer is the version that release wrote.
	FieldReleasedVer = "released.ver"
	// FieldTrade is the id of a trade holding the record ("" or absent: none).
	FieldTrade = "trade"
	// FieldFormat is the record format version.
	FieldFormat = "fmt"
	// FieldUserIDs and FieldMeta are the user ids and metadata kept beside
	// the data (opaque blobs).
	FieldUserIDs = "uids"
	FieldMeta    = "meta"
	// FieldSchema is the schema version the data was written at (the
	// writer's number of migrations); FieldSchemaMin the lowest version that
	// may read it (after the last migration that is not backward
	// compatible).
	FieldSchema    = "schema"
	FieldSchemaMin = "schema.min"
	// FieldHistAt is when the last version was kept in the history (ms,
	// Redis clock).
	FieldHistAt = "hist.at"
	// FieldInboxSeq counts the messages ever sent to the profile.
	FieldInboxSeq = "inbox.seq"
	// FieldSum is the record's checksum (sum.go): "<ver>,<at>,<crc>".
	FieldSum = "sum"
)

// The entry fields of the inbox stream (send.lua writes them) and of the
// dead-letter stream (save.lua moves a message refused too often there,
// replay.lua moves it back).
const (
	// EntryBody is a message's body (opaque); EntryIdemKey its idempotency
	// key (absent: none). A dead letter keeps both.
	EntryBody    = "b"
	EntryIdemKey = "k"
	// EntrySumField is the entry's checksum (EntrySum), carried with the
	// message into the dead letters and back.
	EntrySumField = "c"
	// DeadID is the id a dead letter had in the inbox, DeadTries how often
	// it was refused, DeadErr the last refusal's error and DeadJob the
	// server that refused it.
	DeadID    = "id"
	DeadTries = "n"
	DeadErr   = "err"
	DeadJob   = "job"
	// DeadSum is "<sum>,<n>": the checksum of DeadID, DeadErr and DeadJob
	// (RefusalSum), and a copy of DeadTries.
	DeadSum = "d"
)

// The fields of the refusal-count hash (TriesKey), for an inbox message id:
// id itself holds the count, id+TriesErrSuffix the last refusal's error and
// id+TriesJobSuffix the server that refused it.
const (
	TriesErrSuffix = ":err"
	TriesJobSuffix = ":job"
)

// Format is the record layout this build writes and reads: 2, a checksum
// (FieldSum) beside the data; it reads 1 (none) and rewrites it as 2 with
// its next write. A record with a higher format is refused, never
// overwritten, and builds before 2 refuse a record of format 2.
const Format = 2

// Key is the Redis hash of one profile: "<namespace>:{<driver>:<key>}"
// ("{<driver>:<key>}" without a namespace).
func Key(ns, driver, key string) string {
	if ns == "" {
		return "{" + driver + ":" + key + "}"
	}
	return ns + ":{" + driver + ":" + key + "}" // one concatenation: one allocation
}

// InboxKey is the inbox of the record at recordKey: a stream of messages
// for the profile, in the record's Redis Cluster slot.
func InboxKey(recordKey string) string { return recordKey + ":inbox" }

// TriesKey is the refusal counts of the record at recordKey's inbox
// messages: a hash (<id>, <id>:err, <id>:job), in the record's slot.
func TriesKey(recordKey string) string { return recordKey + ":tries" }

// DeadKey is the dead letters of the record at recordKey: a stream of
// messages refused too often, in the record's slot.
func DeadKey(recordKey string) string { return recordKey + ":dead" }

// IdemKey is the idempotency keys of the record at recordKey's messages: a
// hash of the sender's key to the message id, in the record's slot;
// IdemAtKey when each was stored (a sorted set by ms).
func IdemKey(recordKey string) string { return recordKey + ":idem" }

// IdemAtKey: see IdemKey.
func IdemAtKey(recordKey string) string { return recordKey + ":idem.at" }

// Keys lists every key of the record at recordKey: the record, its inbox,
// history, refusal counts, dead letters and idempotency keys.
func Keys(recordKey string) []string {
	return []string{recordKey, InboxKey(recordKey), HistoryKey(recordKey), TriesKey(recordKey), DeadKey(recordKey),
		IdemKey(recordKey), IdemAtKey(recordKey)}
}

// HistoryKey is the history of the record at recordKey: a hash of kept
// versions (see history.go), in the record's slot.
func HistoryKey(recordKey string) string { return recordKey + ":hist" }

// MaxSchema is the largest schema version (and min-reader) a record, a kept
// version or a move may carry: a profile keeps them in 32 bits. acquire.lua
// answers a record holding a larger one CORRUPT, naming the field, and
// changes nothing; a kept version's header or a move's prepare holding one
// is refused likewise.
const MaxSchema = 1<<31 - 1
