package datadriver

import (
	"fmt"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/internal/tradescript"
)

// beginCall is the call that opens trade id as PREPARED in journal j (what
// tradejournal.Journal.Begin runs), made for the pipeline with the
// participants' prepare marks; begun reads its answer.
func beginCall(j *tradejournal.Journal, id, coordinator string, parts []tradescript.Part) rscript.Pending[tradescript.Result] {
	return tradescript.Begin().Call(j.Key(id), tradescript.BeginArgs{Coordinator: coordinator, Retain: j.Retain(), Parts: parts})
}

// begun reads the begin's answer: nil when the entry was opened, a
// *tradejournal.StateError when one existed already (a recovery aborted
// the id).
func begun(id string, begin rscript.Pending[tradescript.Result], v any, err error) error {
	r, err := begin.Answer(v, err)
	switch {
	case err != nil:
		return fmt.Errorf("trade %s: begin: %w", id, err)
	case !r.Done:
		return &tradejournal.StateError{ID: id, State: tradejournal.State(r.State)}
	}
	return nil
}
