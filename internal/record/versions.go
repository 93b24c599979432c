package record

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kept is one version kept in a record's history hash.
type Kept struct {
	Ver int64
	At  time.Time // when that data was written (Redis clock)
	// Schema and SchemaMin are the data's schema version and min-reader.
	Schema, SchemaMin int
	// Form is how it is stored.
	Form Form
}

// VersionsResult is versions.lua's answer: the current version and the
// versions of the history hash, oldest first.
type VersionsResult struct {
	Ver     int64
	At      time.Time // when the current data was written
	HasData bool
	Kept    []Kept
}

// Versions runs versions.lua on the record at key: one round trip, read
// only.
func Versions(ctx context.Context, rdb redis.Scripter, key string) (VersionsResult, error) {
	v, err := versionsScript.Run(ctx, rdb, []string{key, HistoryKey(key)}).Result()
	if err != nil {
		return VersionsResult{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 4 {
		return VersionsResult{}, fmt.Errorf("%w: versions answered %T", ErrUnexpectedAnswer, v)
	}
	res := VersionsResult{Ver: num(arr[0]), At: msTime(arr[1]), HasData: str(arr[2]) == "1"}
	hist, _ := arr[3].([]any)
	seen := map[int64]bool{}
	for i := 0; i+1 < len(hist); i += 2 {
		if k, ok := keptMeta(str(hist[i]), str(hist[i+1])); ok && !seen[k.Ver] {
			seen[k.Ver] = true
			res.Kept = append(res.Kept, k)
		}
	}
	return res, nil
}

// Wipe erases the record at key and every key beside it (Keys)
// unconditionally: one round trip. It reports whether there was any.
func Wipe(ctx context.Context, rdb redis.Scripter, key string) (bool, error) {
	n, err := wipeScript.Run(ctx, rdb, Keys(key)).Int64()
	return n > 0, err
}
