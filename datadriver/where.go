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
	// Key is the profile key.
	Key string
	// JobID is the server whose session holds the lock; "" when nobody
	// holds it (never joined, released, or given back).
	JobID string
	// Since is when that session took the lock (Redis clock). It is zero
	// when nobody holds the lock, and when it is not known: the lock was
	// taken by a build of this library from before the lock's time was
	// stamped (it stays unknown until the key's next acquisition).
	Since time.Time
	// Epoch is the record's epoch: the fencing token of the holder's
	// session (Profile.Epoch), grown by one with every acquisition.
	Epoch int64
	// Presence is the lock's presence flag: its holder beats presence, so
	// the lock moves as soon as the holder is proven stopped. A lock
	// without it (a driver with DisableHandoff) goes only by age: LockTTL +
	// LockSkew after its holder's last write.
	Presence bool
	// Status is the holder's presence beat as read now, on the Redis clock:
	// presencecore.Alive (it beat within PresenceTTL: its session is live there),
	// presencecore.Stopped (no live beat for a whole PresenceTTL: the server has
	// stopped, and the key's next join takes the lock over at once, by the
	// proof rule, when the lock carries the presence flag), or
	// presencecore.Unknown (a missing beat proves nothing yet, or nobody holds
	// the lock). This Node reads itself as Alive.
	Status presence.Status
	// Local reports that the holder is this very Node.
	Local bool
}

// Held reports whether a session holds the lock.
func (h Holder) Held() bool { return h.JobID != "" }

// holderFields are the record fields Where reads, in its order.
var holderFields = []string{record.FieldLockJob, record.FieldLockToken, record.FieldLockPresence,
	record.FieldLockSince, record.FieldEpoch}

// Where says where key's session lock is held: by which server's session
// (JobID), since when, and whether that server is alive now (its presence
// beat). It reads the record's lock fields (one read, no lock taken,
// nothing written) and, for a lock held by another server, its presence
// (one more read, through the Node's Redis client: never the client that
// beats). A key never joined, or not held now, answers a Holder with an
// empty JobID.
//
// The answer is a snapshot: the lock may move the moment after. A record
// whose lock fields are not what this library writes answers
// ErrCorruptRecord (a *CorruptRecordError naming the field); ErrInvalidKey
// for a key no profile can have. When the presence read fails the Holder
// comes with Status Unknown and the error. ctx bounds the reads.
func (d *Driver[T]) Where(ctx context.Context, key string) (Holder, error) {
	if err := ValidKey(key); err != nil {
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
