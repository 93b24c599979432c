package record

import "strconv"

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
)

// Format is the record layout this build writes and reads. A record with a
// higher format is refused, never overwritten.
const Format = 1

// Key is the Redis hash of one profile: "<namespace>:{<driver>:<key>}"
// ("{<driver>:<key>}" without a namespace).
func Key(ns, driver, key string) string {
	k := "{" + driver + ":" + key + "}"
	if ns == "" {
		return k
	}
	return ns + ":" + k
}

// SlotFields names the fields of history ring slot s (a version kept in the
// record hash): its version, its write time and its data.
func SlotFields(s int64) (ver, at, data string) {
	p := "h" + strconv.FormatInt(s, 10) + "."
	return p + "v", p + "t", p + "d"
}
