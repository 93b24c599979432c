package datadriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/record"
)

// errWiped marks the end of a session whose record Wipe erased.
var errWiped = errors.New("the record was erased")

// Wipe erases key's record and its history, for an erasure request. It does
// not wait for the lock: a session of the key on this Node ends at once with
// ErrLockLost (the game hears it through Kick with ReasonWiped and
// OnLockLost), and a session
// on another server ends at its next save, which finds the lock gone and
// cannot write the record back.
func (d *Driver[T]) Wipe(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("wipe: %w", err)
	}
	rk := d.recordKey(key)
	if _, err := record.Wipe(ctx, d.node.rdb, rk); err != nil {
		return fmt.Errorf("wipe %q: %w", key, err)
	}
	d.mu.Lock()
	p := d.profiles[key]
	d.mu.Unlock()
	if p != nil {
		p.endWith(causeWiped, fmt.Errorf("wipe %q: %w: %w", key, ErrLockLost, errWiped))
	}
	d.log.Info("wiped a profile", "key", key)
	return nil
}
