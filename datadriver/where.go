package datadriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/presence"
)

// Holder is where a key's session lock is held, as Driver.Where read it.
type Holder struct {
	Key   string    // the profile key
	JobID string    // the server whose session holds the lock; "" when nobody does
	Since time.Time // when that session took the lock (Redis clock); zero when nobody holds it, or when an older build took it
	Epoch int64     // the record's epoch: the holder session's fencing token (Profile.Epoch)
	// Presence is the lock's presence flag: the lock moves as soon as its
	// holder is proven stopped; without it, only once LockTTL + LockSkew old.
	Presence bool
	// Status is the holder's presence beat as read now: presence.Alive,
	// presence.Stopped (a join takes a lock with the presence flag over at
	// once), or presence.Unknown (no proof yet, or nobody holds the lock).
	// This Node reads itself as Alive.
	Status presence.Status
	Local  bool // the holder is this very Node
}

// Held reports whether a session holds the lock.
func (h Holder) Held() bool { return h.JobID != "" }

// holderFields are the record fields Where reads, in its order.
var holderFields = []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockPresence,
	record.FieldLockSince, record.FieldEpoch}

// Where says where key's session lock is held, and whether its server is
// alive now: one read of the record's lock fields and, for another server's
// lock, one of its presence (no lock taken, nothing written). The answer is
// a snapshot. It answers ErrCorruptRecord for lock fields this library did
// not write, ErrInvalidKey for a key no profile can have, and a Holder with
// Status Unknown beside the error of a failed presence read.
func (d *Driver[T]) Where(ctx context.Context, key string) (Holder, error) {
	if err := validKey(key); err != nil {
		return Holder{}, fmt.Errorf("where: %w", err)
	}
	vals, err := d.node.rdb.HMGet(ctx, d.recordKey(key), holderFields...).Result()
	switch {
	case isWrongType(err):
		return Holder{}, d.corruptField(key, record.CorruptField{Field: "(record)", Why: "the record key is not a hash"})
	case err != nil && !errors.Is(err, redis.Nil):
		return Holder{}, fmt.Errorf("where %q: %w", key, err)
	}
	h := Holder{Key: key}
	job, token, flag := fieldString(vals[0]), fieldString(vals[1]), fieldString(vals[2])
	if e := fieldString(vals[4]); e != "" {
		if h.Epoch, err = strconv.ParseInt(e, 10, 64); err != nil || h.Epoch < 0 {
			return Holder{}, d.corruptField(key, record.CorruptField{Field: record.FieldEpoch, Why: "not an integer"})
		}
	}
	if token == "" {
		return h, nil
	}
	if job == "" {
		return Holder{}, d.corruptField(key, record.CorruptField{Field: record.FieldLockJob, Why: "a lock without a holder"})
	}
	h.JobID, h.Presence, h.Local = job, flag == "1", job == d.node.jobID
	h.Since = record.LockSince(fieldString(vals[3]), h.Epoch)
	if h.Local { // this Node: alive while its lease holds, or its sessions end first
		h.Status = presence.Alive
		return h, nil
	}
	rd := d.reader.Read(ctx, job)
	h.Status = presence.Status(rd.Status)
	if rd.Err != nil {
		return h, fmt.Errorf("where %q: %w", key, rd.Err)
	}
	return h, nil
}

// newReader is the presence reader of Where: the Node's presence settings
// (hash, shards, TTL, clock) over the Node's Redis client, never started, so
// that reads for the game never queue behind or in front of the beats.
func newReader(n *Node) (*presencecore.Presence, error) {
	cfg := n.presence.Config()
	cfg.OnLapse = nil
	return presencecore.New(n.rdb, cfg)
}
