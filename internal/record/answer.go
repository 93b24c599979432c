package record

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrUnexpectedAnswer means a script answered in a shape this package does
// not know (a foreign script under the same SHA, or a proxy in between).
var ErrUnexpectedAnswer = errors.New("record: unexpected script answer")

// The helpers below read script answers: go-redis gives Lua strings as
// string, integers as int64 and false as nil. They are the only code that
// reads an answer by position.

// tagged splits an answer {tag, ...} into its elements and its tag.
func tagged(v any) ([]any, string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, "", fmt.Errorf("%w: %T", ErrUnexpectedAnswer, v)
	}
	tag, _ := arr[0].(string)
	return arr, tag, nil
}

// pairsOf reads a flat {a1, b1, a2, b2, ...} answer, one f(a, b) a pair
// (nil for an answer that is not an array).
func pairsOf[T any](v any, f func(a, b any) T) []T {
	arr, _ := v.([]any)
	var out []T
	for i := 0; i+1 < len(arr); i += 2 {
		out = append(out, f(arr[i], arr[i+1]))
	}
	return out
}

// elem is arr[i], or nil past its end.
func elem(arr []any, i int) any {
	if i < len(arr) {
		return arr[i]
	}
	return nil
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

// blob is a string answer as bytes; nil for false (an absent field).
func blob(v any) []byte {
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
		if x == "" { // an absent field: no parse (its error would be allocated)
			return 0
		}
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// msTime is a millisecond Redis timestamp; zero for 0 or false.
func msTime(v any) time.Time {
	if ms := num(v); ms != 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// flag is '1' or '0', as the scripts take booleans.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// arg is ARGV[i] (1-based, as in Lua), or "" past its end.
func arg(argv []string, i int) string {
	if i >= 1 && i <= len(argv) {
		return argv[i-1]
	}
	return ""
}

// wantArgs checks the count of an observed call's ARGV.
func wantArgs(script string, argv []string, n int) error {
	if len(argv) != n {
		return fmt.Errorf("record: %s call with %d arguments, want %d", script, len(argv), n)
	}
	return nil
}
