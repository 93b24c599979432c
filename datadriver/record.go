package datadriver

import (
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// recordFormat is the record layout this build writes and reads. A record
// with a higher fmt is refused as corrupt and never overwritten.
const recordFormat = 1

// MaxKeyBytes bounds a profile key: it travels in every handoff message,
// whose size is limited.
const MaxKeyBytes = 512

// RecordKey is the Redis hash of one profile: "<namespace>:{<driver>:<key>}"
// ("{<driver>:<key>}" without a namespace). Its past versions live in the same
// hash; the hash tag keeps it in one Redis Cluster slot. Operator tools use it
// to read a record.
func RecordKey(ns, driver, key string) string {
	k := "{" + driver + ":" + key + "}"
	if ns == "" {
		return k
	}
	return ns + ":" + k
}

// ValidKey reports whether key can name a profile: an error wrapping
// ErrInvalidKey when it is empty, longer than MaxKeyBytes, not UTF-8 or has
// control characters.
func ValidKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the key is empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: control character %U", ErrInvalidKey, r)
		}
	}
	return nil
}

// acquired is the record as an acquire found it.
type acquired struct {
	how     string // new, free, stolen, expired
	epoch   int64
	ver     int64
	data    []byte // nil for a record without data
	at      time.Time
	trade   string
	uids    []byte
	meta    []byte
	prevJob string
}

// lockState is a lock as a LOCKED answer describes it.
type lockState struct {
	job      string
	token    string
	presence bool
	age      time.Duration
}

// Helpers reading script answers: go-redis gives strings as string, integers
// as int64 and Lua false as nil.

func answer(v any) ([]any, string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, "", fmt.Errorf("unexpected script answer %T", v)
	}
	tag, _ := arr[0].(string)
	return arr, tag, nil
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func bytesOf(v any) []byte {
	if s, ok := v.(string); ok {
		return []byte(s)
	}
	return nil
}

func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func msTime(v any) time.Time {
	ms := num(v)
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// elem is arr[i], or nil past its end.
func elem(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
}

func parseAcquired(arr []any) acquired {
	return acquired{
		how:     str(elem(arr, 1)),
		epoch:   num(elem(arr, 2)),
		ver:     num(elem(arr, 3)),
		data:    bytesOf(elem(arr, 4)),
		at:      msTime(elem(arr, 5)),
		trade:   str(elem(arr, 6)),
		uids:    bytesOf(elem(arr, 7)),
		meta:    bytesOf(elem(arr, 8)),
		prevJob: str(elem(arr, 9)),
	}
}

func parseLocked(arr []any) lockState {
	return lockState{
		job:      str(elem(arr, 1)),
		token:    str(elem(arr, 2)),
		presence: str(elem(arr, 3)) == "1",
		age:      time.Duration(num(elem(arr, 4))) * time.Millisecond,
	}
}
