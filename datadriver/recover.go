package datadriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckernel/playerdata/internal/record"

	"github.com/ckernel/playerdata/internal/tradejournal"
)

// recoverTrade resolves the trade mark on a record whose lock this load has
// just taken, before the profile is handed out. The journal decides: a
// COMMITTED trade's image for this participant is written (if the mark is
// still there, which says it was not yet), a PREPARED trade is aborted by
// compare-and-set (so its coordinator can no longer commit it), and the
// mark of an aborted trade is cleared. A trade nobody opened a journal for
// is aborted too, with a tombstone. Every write is fenced by the new lock
// token, so recovery follows the load's ownership rule.
func (d *Driver[T]) recoverTrade(ctx context.Context, key, token string, a *record.AcquireResult) error {
	id := a.Trade
	j := d.node.journal
	e, err := j.Read(ctx, id)
	switch {
	case errors.Is(err, tradejournal.ErrNotFound):
		e = &tradejournal.Entry{ID: id, State: tradejournal.Prepared}
	case errors.Is(err, tradejournal.ErrCorrupt):
		return &CorruptRecordError{Key: key, Err: err}
	case err != nil:
		return fmt.Errorf("recover trade %s of %q: %w", id, key, err)
	}
	if e.State == tradejournal.Prepared {
		err := j.Abort(ctx, id)
		var se *tradejournal.StateError
		switch {
		case err == nil:
			e.State = tradejournal.Aborted
		case errors.As(err, &se) && se.State == tradejournal.Committed:
			// Its coordinator committed it just now: settle it.
			if e, err = j.Read(ctx, id); err != nil {
				return fmt.Errorf("recover trade %s of %q: %w", id, key, err)
			}
		default:
			return fmt.Errorf("recover trade %s of %q: %w", id, key, err)
		}
	}
	if e.State == tradejournal.Aborted {
		if _, err := d.write(ctx, key, record.SaveArgs{Mode: record.ModeSave, Token: token, Trade: id}); err != nil {
			return fmt.Errorf("recover trade %s of %q: clear the aborted mark: %w", id, key, err)
		}
		d.log.Info("recovered an aborted trade", "key", key, "trade", id)
		a.Trade = ""
		return nil
	}
	i := e.Find(d.cfg.Name, key)
	if i < 0 {
		return &CorruptRecordError{Key: key, Err: fmt.Errorf("marked with trade %s, whose journal does not list it", id)}
	}
	part := e.Participants[i]
	img := part.Image
	sum := record.RecordSum(img, part.Schema, part.SchemaMin, a.UserIDs, a.Meta)
	res, err := d.write(ctx, key, record.SaveArgs{Mode: record.ModeSettle, Token: token, Trade: id, Data: img,
		Schema: part.Schema, SchemaMin: part.SchemaMin, Sum: sum})
	if err != nil {
		return fmt.Errorf("recover trade %s of %q: settle: %w", id, key, err)
	}
	if res.How != record.HowAlreadySettled {
		a.Settled(img, res.Ver, res.At, part.Schema, part.SchemaMin, sum)
	}
	a.Trade = ""
	d.node.markSettled(j, id, []int{i})
	d.log.Info("recovered a committed trade", "key", key, "trade", id, "coordinator", e.Coordinator)
	return nil
}
