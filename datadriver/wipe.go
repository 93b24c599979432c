package datadriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/record"
)

// errWiped marks the end of a session whose record Wipe erased.
var errWiped = errors.New("the record was erased")

// Wipe erases key's record and every key beside it (an erasure request), at
// once: a session of it here ends with ReasonWiped; one elsewhere ends at its
// next write, which finds the record gone and never writes it back.
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
