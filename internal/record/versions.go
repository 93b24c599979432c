package record

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kept is one version kept in a record's history hash.
type Kept struct {
	Ver int64
	At  time.Time // when that data was written (Redis clock)
	// Schema and SchemaMin are the data's schema version and min-reader.
	Schema, SchemaMin int
}

// Slot is one legacy history ring slot of a record (kept in the record hash
// by builds before the history hash).
type Slot struct {
	Slot int64
	Ver  int64
	At   time.Time // write time (Redis clock)
}

// VersionsResult is versions.lua's answer: the current version, the
// versions of the history hash and the legacy ring slots.
type VersionsResult struct {
	Ver     int64
	At      time.Time // when the current data was written
	HasData bool
	Kept    []Kept
	Slots   []Slot
}

// Versions runs versions.lua on the record at key: one round trip, read
// only.
func Versions(ctx context.Context, rdb redis.Scripter, key string) (VersionsResult, error) {
	v, err := versionsScript.Run(ctx, rdb, []string{key, HistoryKey(key)}).Result()
	if err != nil {
		return VersionsResult{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 5 {
		return VersionsResult{}, fmt.Errorf("%w: versions answered %T", ErrUnexpectedAnswer, v)
	}
	res := VersionsResult{Ver: num(arr[0]), At: msTime(arr[1]), HasData: str(arr[2]) == "1"}
	hist, _ := arr[3].([]any)
	for i := 0; i+1 < len(hist); i += 2 {
		k := Kept{Ver: num(hist[i])}
		parts := strings.Split(str(hist[i+1]), ",")
		if len(parts) == 3 {
			k.At = msTime(parts[0])
			k.Schema, _ = strconv.Atoi(parts[1])
			k.SchemaMin, _ = strconv.Atoi(parts[2])
		}
		res.Kept = append(res.Kept, k)
	}
	slots, _ := arr[4].([]any)
	for i := 0; i+2 < len(slots); i += 3 {
		res.Slots = append(res.Slots, Slot{Slot: num(slots[i]), Ver: num(slots[i+1]), At: msTime(slots[i+2])})
	}
	return res, nil
}

// KeptData reads the data of version ver from the history of the record at
// key (as its writer stored it: compressed), or from legacy ring slot slot
// when slot >= 0; nil when it is not there (any more).
func KeptData(ctx context.Context, rdb redis.Cmdable, key string, ver, slot int64) ([]byte, error) {
	if slot < 0 {
		b, err := rdb.HGet(ctx, HistoryKey(key), HistDataField(ver)).Bytes()
		if err == redis.Nil {
			return nil, nil
		}
		return b, err
	}
	vf, _, df := SlotFields(slot)
	got, err := rdb.HMGet(ctx, key, vf, df).Result()
	if err != nil {
		return nil, err
	}
	if str(got[0]) != strconv.FormatInt(ver, 10) || got[1] == nil {
		return nil, nil
	}
	return blob(got[1]), nil
}

// Wipe erases the record at key and every key beside it (Keys)
// unconditionally: one round trip. It reports whether there was any.
func Wipe(ctx context.Context, rdb redis.Scripter, key string) (bool, error) {
	n, err := wipeScript.Run(ctx, rdb, Keys(key)).Int64()
	return n > 0, err
}
