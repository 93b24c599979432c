package record

import (
	"strconv"
	"strings"
	"time"
)

// FieldLockSince is when the lock's current session took it:
// "<epoch>,<ms>" (Redis clock), stamped by every acquisition (acquire.lua)
// and every adoption (save.lua). It tells the time only while its epoch is
// the record's: a build before this field takes locks without stamping it.
const FieldLockSince = "lock.since"

// LockSince is the time a lock.since field says the session of epoch took
// the lock, or zero when it says nothing of that session: absent, of
// another epoch (stamped before a build without lock.since took the lock),
// or not in its form.
func LockSince(field string, epoch int64) time.Time {
	e, ms, ok := strings.Cut(field, ",")
	if !ok || e != strconv.FormatInt(epoch, 10) {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
