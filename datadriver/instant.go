package datadriver

import (
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// instant is a local time as an offset from the driver's base, monotonic
// where the clock is: 8 bytes where a time.Time takes 24, for the times
// every resident profile keeps.
type instant int64

// instantOf is t as an instant.
func (d *Driver[T]) instantOf(t time.Time) instant { return instant(t.Sub(d.base)) }

// timeAt is the local time of instant i.
func (d *Driver[T]) timeAt(i instant) time.Time { return d.base.Add(time.Duration(i)) }

// redisClock is the Redis clock as a profile reckons it from one reading:
// the Redis time read (Unix ns) less the local instant it was read at, so
// that the Redis time at instant i is the clock plus i (on the monotonic
// clock, whatever the local wall clock does).
type redisClock int64

// redisClockOf is the Redis clock that read redis at local time at.
func (d *Driver[T]) redisClockOf(redis, at time.Time) redisClock {
	return redisClock(wallNS(redis) - int64(d.instantOf(at)))
}

// redisTime is the Redis time c reckons at local time now.
func (d *Driver[T]) redisTime(c redisClock, now time.Time) time.Time {
	return time.Unix(0, int64(c)+int64(d.instantOf(now)))
}

// wallNS is a Redis-clock time as nanoseconds since the Unix epoch (0 for
// the zero time): what a profile keeps of the Redis times it saw.
func wallNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// wallTime is the time wallNS gave ns for.
func wallTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// storedMeta is what the executor keeps of the stored data's write time,
// schema and min-reader (record.KeptMeta in 16 bytes instead of 40).
type storedMeta struct {
	at                int64 // wallNS
	schema, schemaMin int32
}

// metaOf is k as a storedMeta.
func metaOf(k record.KeptMeta) storedMeta {
	return storedMeta{at: wallNS(k.At), schema: int32(k.Schema), schemaMin: int32(k.SchemaMin)}
}

// kept is m as a record.KeptMeta.
func (m storedMeta) kept() record.KeptMeta {
	return record.KeptMeta{At: wallTime(m.at), Schema: int(m.schema), SchemaMin: int(m.schemaMin)}
}
