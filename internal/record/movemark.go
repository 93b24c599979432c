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

// argv is ARGV of movemark.lua.
func (m MoveMark) argv() []any { return []any{m.Token, m.ID, m.State, m.From, m.To, m.Why} }

// MarkMove runs movemark.lua on the record at key: one round trip. It
// reports whether the mark landed (false: the lock is not m.Token's, or
// there is no record).
func MarkMove(ctx context.Context, rdb redis.Scripter, key string, m MoveMark) (bool, error) {
	v, err := moveMarkScript.Run(ctx, rdb, []string{key}, m.argv()...).Result()
	if err != nil {
		return false, err
	}
	if n, ok := v.(int64); ok && (n == 0 || n == 1) {
		return n == 1, nil
	}
	return false, fmt.Errorf("%w: movemark answered %v", ErrUnexpectedAnswer, v)
}
