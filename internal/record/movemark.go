package record

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// MoveMark is a move that ended without a flip, as movemark.lua writes it
// for the record's last move.
type MoveMark struct {
	// Token is the source's lock token: the mark lands only while the lock
	// carries it.
	Token string
	// ID, From and To are the move's id, source and target JobIDs; State
	// its state (MoveCancelled); Why one line on why it ended so.
	ID, State, From, To, Why string
}

// keys are KEYS of movemark.lua: the record.
func (m MoveMark) keys(key string) []string { return []string{key} }

// argv is ARGV of movemark.lua.
func (m MoveMark) argv() []any { return []any{m.Token, m.ID, m.State, m.From, m.To, m.Why} }

// ParseMoveMarkArgs reads the ARGV of an observed movemark.lua call.
func ParseMoveMarkArgs(argv []string) (MoveMark, error) {
	if err := wantArgs(ScriptMoveMark, argv, 6); err != nil {
		return MoveMark{}, err
	}
	return MoveMark{Token: arg(argv, 1), ID: arg(argv, 2), State: arg(argv, 3), From: arg(argv, 4), To: arg(argv, 5),
		Why: arg(argv, 6)}, nil
}

// parseMoveMark reads movemark.lua's answer: 1 the mark landed, 0 not.
func parseMoveMark(v any) (bool, error) {
	if n, ok := v.(int64); ok && (n == 0 || n == 1) {
		return n == 1, nil
	}
	return false, fmt.Errorf("%w: movemark answered %v", ErrUnexpectedAnswer, v)
}

// MarkMove runs movemark.lua on the record at key: one round trip. It
// reports whether the mark landed (false: the lock is not m.Token's, or
// there is no record).
func MarkMove(ctx context.Context, rdb redis.Scripter, key string, m MoveMark) (bool, error) {
	return moveMarkScript.Run(ctx, rdb, key, m)
}
