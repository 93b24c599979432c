package main

// The lock fields of records, read in one pipeline for locks and unlock.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// lockFields are the record fields readLocks reads, in recordLock's order.
var lockFields = []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockAt,
	record.FieldLockPresence, record.FieldEpoch, record.FieldTrade, record.FieldLockSince}

// recordLock is the lock of one record as read.
type recordLock struct {
	RecordKey string
	Exists    bool // any of the fields is set
	Job       string
	Token     string
	At        time.Time // last acquire, save or release (Redis clock); zero when never
	Presence  bool      // the presence flag
	Epoch     int64
	Trade     string // a pending trade's id, or ""
	// Since is when the holder's session took the lock (Redis clock); zero
	// when not held or not known (record.LockSince).
	Since time.Time
	Err   error // the record could not be read (not a hash)
}

// Held reports whether the lock is taken.
func (l recordLock) Held() bool { return l.Token != "" }

// readLock reads the lock of the record rk on its node (see readLocks).
func (r *reader) readLock(ctx context.Context, rk string) (recordLock, time.Time, error) {
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return recordLock{}, time.Time{}, err
	}
	locks, now, err := readLocks(ctx, node, []string{rk})
	if err != nil {
		return recordLock{}, time.Time{}, err
	}
	return locks[0], now, nil
}

// readLocks reads the lock of each record in keys in one pipeline on node
// (the one node serving them all), with its clock (TIME) at the read. A key that is not a record answers a
// recordLock with Err set; an error is returned only when the pipeline
// itself failed (Redis unreachable).
func readLocks(ctx context.Context, rdb redis.Cmdable, keys []string) ([]recordLock, time.Time, error) {
	cmds := make([]*redis.SliceCmd, len(keys))
	var clock *redis.TimeCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, lockFields...)
		}
		clock = p.Time(ctx)
		return nil
	})
	if clock == nil || clock.Err() != nil {
		if err == nil {
			err = clock.Err()
		}
		return nil, time.Time{}, fmt.Errorf("read %d records: %w", len(keys), err)
	}
	out := make([]recordLock, len(keys))
	for i, c := range cmds {
		l := recordLock{RecordKey: keys[i]}
		vals, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			l.Err = err
			out[i] = l
			continue
		}
		str := func(j int) string {
			s, ok := vals[j].(string)
			if ok {
				l.Exists = true
			}
			return s
		}
		l.Job, l.Token = str(0), str(1)
		if n, _ := strconv.ParseInt(str(2), 10, 64); n > 0 {
			l.At = time.UnixMilli(n)
		}
		l.Presence = str(3) == "1"
		l.Epoch, _ = strconv.ParseInt(str(4), 10, 64)
		l.Trade = str(5)
		if l.Held() {
			l.Since = record.LockSince(str(6), l.Epoch)
		}
		out[i] = l
	}
	return out, clock.Val(), nil
}

// holderPresence is a lock holder's presence as locks, unlock and their
// --json output show it.
type holderPresence struct {
	Status      string   `json:"status"` // alive, stopped, unknown
	ExpiresInMS *float64 `json:"expires_in_ms,omitempty"`
	Error       string   `json:"error,omitempty"`
	// Why says, for an unknown reading without an error, why a missing
	// beat proves nothing yet: from the shard's run mark and INFO.
	Why     string `json:"why,omitempty"`
	reading presencecore.Reading
	// noHash: the holder's shard of the presence hash does not exist (a
	// reader pointed elsewhere than the servers).
	noHash bool
}

// readHolder reads job's presence as the servers read it.
func (r *reader) readHolder(ctx context.Context, job string) holderPresence {
	return r.holderOf(ctx, job, r.pres.Read(ctx, job))
}

// holderOf is job's presence as read in rd, with, when it is unknown
// without an error, why a missing beat proves nothing yet (the shard's run
// mark and INFO, read now).
func (r *reader) holderOf(ctx context.Context, job string, rd presencecore.Reading) holderPresence {
	h := holderPresence{Status: rd.Status.String(), reading: rd}
	if rd.Status == presencecore.Alive || (rd.Status == presencecore.Unknown && rd.Err == nil) {
		e := ms(rd.ExpiresIn)
		h.ExpiresInMS = &e
	}
	if rd.Err != nil {
		h.Error = rd.Err.Error()
	} else if rd.Status == presencecore.Unknown {
		ev := r.readRunEvidence(ctx, r.pres.KeyOf(job))
		h.Why, h.noHash = ev.why(r.ttl), ev.ReadError == "" && !ev.Exists
	}
	return h
}

// String says it for people: "alive (its beat expires in 6.20 s)".
func (h holderPresence) String() string {
	rd := h.reading
	switch {
	case rd.Status == presencecore.Alive:
		return fmt.Sprintf("alive (its beat expires in %s)", human(rd.ExpiresIn))
	case rd.Status == presencecore.Stopped:
		return "stopped (no live beat for a full PresenceTTL)"
	case rd.Err != nil:
		return "unknown (the presence read failed: " + rd.Err.Error() + ")"
	default:
		return fmt.Sprintf("unknown (a missing beat proves nothing for %s more: %s)", human(rd.ExpiresIn), h.Why)
	}
}
