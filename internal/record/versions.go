package record

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slot is one history ring slot of a record.
type Slot struct {
	Ver int64
	At  time.Time // write time (Redis clock)
	Set bool      // the slot holds a version
}

// VersionsResult is versions.lua's answer: the current version and every
// ring slot.
type VersionsResult struct {
	Ver     int64
	At      time.Time // when the current data was written
	HasData bool
	Slots   []Slot // slot s at index s
}

// Versions runs versions.lua on the record at key with history ring slots:
// one round trip, read only.
func Versions(ctx context.Context, rdb redis.Scripter, key string, history int) (VersionsResult, error) {
	v, err := versionsScript.Run(ctx, rdb, []string{key}, history).Result()
	if err != nil {
		return VersionsResult{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 3 || (len(arr)-3)%2 != 0 {
		return VersionsResult{}, fmt.Errorf("%w: versions answered %T of %d", ErrUnexpectedAnswer, v, len(arr))
	}
	res := VersionsResult{Ver: num(arr[0]), At: msTime(arr[1]), HasData: str(arr[2]) == "1"}
	for i := 3; i+1 < len(arr); i += 2 {
		res.Slots = append(res.Slots, Slot{Ver: num(arr[i]), At: msTime(arr[i+1]), Set: arr[i] != nil})
	}
	return res, nil
}

// Wipe erases the record at key (unconditionally): one round trip. It
// reports whether there was one.
func Wipe(ctx context.Context, rdb redis.Scripter, key string) (bool, error) {
	n, err := wipeScript.Run(ctx, rdb, []string{key}).Int64()
	return n > 0, err
}
