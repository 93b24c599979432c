package datadriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradescript"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/tradejournal"
)

// TradeParty is a profile that can take part in a trade: any *Profile[T].
type TradeParty interface {
	tradeParty() party
}

// Tx is a trade in progress, handed to the trade function: TradeData gives
// the function its copy of each participant's data.
type Tx struct {
	copies map[party]any
	err    error
}

// TradeData returns tx's copy of p's data for the trade function, written
// only if the trade commits. For a profile that is not a participant it
// returns a throwaway zero value and the trade fails with ErrInvalidTrade.
func TradeData[T any](tx *Tx, p *Profile[T]) *T {
	if v, ok := tx.copies[p]; ok {
		return v.(*T)
	}
	if tx.err == nil {
		tx.err = fmt.Errorf("%w: profile %q is not a participant", ErrInvalidTrade, p.key)
	}
	return new(T)
}

// Trade changes two or more profiles held by this Node, of one driver or
// several, all or none (docs/trades.md): fn changes copies of their data
// (TradeData); an error from fn changes nothing and is returned. The
// participants' writes and Updates wait for it. ctx bounds each step.
func Trade(ctx context.Context, fn func(tx *Tx) error, profiles ...TradeParty) error {
	parties, err := tradeParties(profiles)
	if err != nil {
		return err
	}
	node := parties[0].tradeNode()
	for i, p := range parties {
		if err := p.enterTrade(ctx); err != nil {
			for _, q := range parties[:i] {
				q.leaveTrade()
			}
			return fmt.Errorf("trade: %s: %w", p.tradeKey(), err)
		}
	}
	defer func() {
		for _, p := range parties {
			p.leaveTrade()
		}
	}()

	tx := &Tx{copies: make(map[party]any, len(parties))}
	for _, p := range parties {
		c, err := p.copyForTrade()
		if err != nil {
			return fmt.Errorf("trade: copy %s: %w", p.tradeKey(), err)
		}
		tx.copies[p] = c
	}
	var ferr error
	if perr := protect("trade function", func() { ferr = fn(tx) }); perr != nil {
		var pe *PanicError
		errors.As(perr, &pe)
		node.log.Error("trade function panicked; recovered, nothing changed", "panic", pe.Value, "stack", string(pe.Stack))
		return fmt.Errorf("trade: %w", perr)
	}
	if ferr != nil {
		return ferr
	}
	if tx.err != nil {
		return tx.err
	}
	run := &tradeRun{journal: node.journal, parties: parties}
	for _, p := range parties {
		img, err := p.imageOf(tx.copies[p])
		if err != nil {
			return fmt.Errorf("trade: %s: %w", p.tradeKey(), err)
		}
		run.images = append(run.images, img)
	}
	if run.id, err = node.newToken(); err != nil {
		return err
	}
	return run.execute(ctx, tx)
}

// tradeParties validates the participants and sorts them into the lock
// order (by record key), so that trades sharing participants cannot
// deadlock.
func tradeParties(profiles []TradeParty) ([]party, error) {
	if len(profiles) < 2 {
		return nil, fmt.Errorf("%w: %d profiles, want two or more", ErrInvalidTrade, len(profiles))
	}
	parties := make([]party, 0, len(profiles))
	seen := make(map[string]bool, len(profiles))
	for _, tp := range profiles {
		if tp == nil {
			return nil, fmt.Errorf("%w: nil profile", ErrInvalidTrade)
		}
		p := tp.tradeParty()
		if p.tradeNode() != profiles[0].tradeParty().tradeNode() {
			return nil, fmt.Errorf("%w: %s belongs to another Node", ErrInvalidTrade, p.tradeKey())
		}
		if seen[p.tradeRecord()] {
			return nil, fmt.Errorf("%w: %s appears twice", ErrInvalidTrade, p.tradeKey())
		}
		seen[p.tradeRecord()] = true
		parties = append(parties, p)
	}
	slices.SortFunc(parties, func(a, b party) int { return cmp.Compare(a.tradeRecord(), b.tradeRecord()) })
	return parties, nil
}

// tradeOutcome is what a trade run knows of its outcome.
type tradeOutcome int

const (
	outcomeInFlight  tradeOutcome = iota
	outcomeCommitted              // the commit landed
	outcomeAborted                // it never will
	outcomeUnknown                // the commit's answer was lost and the journal unread
)

// tradeRun is one trade: its id, its participants and their images.
type tradeRun struct {
	id      string
	journal *tradejournal.Journal
	parties []party
	images  [][]byte

	// notReplicated reports a commit fewer than MinReplicas replicas
	// acknowledged (the trade stands).
	notReplicated error

	mu      sync.Mutex
	outcome tradeOutcome
}

func (r *tradeRun) setOutcome(o tradeOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcome = o
}

func (r *tradeRun) getOutcome() tradeOutcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcome
}

// execute runs prepare, commit and settle.
func (r *tradeRun) execute(ctx context.Context, tx *Tx) error {
	node := r.parties[0].tradeNode()
	parts := make([]tradescript.Part, len(r.parties))
	calls := make([]rscript.Call, 0, len(r.parties)+1)
	for i, p := range r.parties {
		token, ver := p.lockInfo()
		schema, schemaMin := p.imageSchema()
		parts[i] = tradescript.Part{Desc: tradescript.Desc{Driver: p.tradeDriver(), Key: p.tradeKey(), Token: token, Ver: ver,
			Schema: schema, SchemaMin: schemaMin}, Image: r.images[i]}
	}
	prepares := make([]rscript.Pending[record.PrepareResult], len(r.parties))
	for i, p := range r.parties {
		prepares[i] = record.PrepareArgs{Token: parts[i].Token, Trade: r.id, Ver: parts[i].Ver}.Call(p.tradeRecord())
		calls = append(calls, prepares[i].Call)
	}
	// The journal entry goes last: an entry that exists has its marks before
	// it, so a crash leaves no PREPARED entry that no participant's recovery
	// would find (and a PREPARED entry expires on its own after Retain).
	begin := beginCall(r.journal, r.id, node.jobID, parts)
	calls = append(calls, begin.Call)

	// 1. Prepare: every record's mark and the journal entry, one round trip.
	sctx, cancel := node.clock.WithTimeout(ctx, node.cfg.SaveTimeout)
	vals, errs := rscript.Run(sctx, node.rdb, calls)
	cancel()
	n := len(r.parties)
	prepErr := begun(r.id, begin, vals[n], errs[n])
	marked := make([]bool, n) // the mark may be on the record
	for i, p := range r.parties {
		res, err := prepares[i].Answer(vals[i], errs[i])
		err = prepareResult(p.tradeKey(), res, err)
		marked[i] = err == nil || errs[i] != nil // a failed call may still have landed
		if err != nil && prepErr == nil {
			prepErr = err
		}
		if errors.Is(err, ErrLockLost) {
			p.loseLock(err)
		}
	}
	if prepErr != nil {
		r.abort(ctx, marked)
		return fmt.Errorf("trade %s: %w: %w", r.id, ErrTradeAborted, prepErr)
	}

	// 2. Commit: the journal's one compare-and-set, only while every
	// participant's lease holds: a server that may have lost a lock without
	// knowing it commits nothing.
	for _, p := range r.parties {
		if err := p.checkLease(); err != nil {
			r.abort(ctx, marked)
			return fmt.Errorf("trade %s: %w: %w", r.id, ErrTradeAborted, err)
		}
	}
	if err := r.commit(ctx); err != nil {
		return err
	}

	// 3. Settle: every image into its record, one round trip.
	r.settle(ctx, tx, parts)
	return r.notReplicated
}

// settle writes every committed image into its record in one round trip; a
// record whose settle fails is settled by its next save, or, when its lock
// is lost, by its next owner from the journal.
func (r *tradeRun) settle(ctx context.Context, tx *Tx, parts []tradescript.Part) {
	node := r.parties[0].tradeNode()
	for i, p := range r.parties {
		p.applyImage(tx.copies[p], r.images[i])
	}
	settles := make([]rscript.Pending[record.SaveResult], len(r.parties))
	calls := make([]rscript.Call, len(r.parties))
	for i, p := range r.parties {
		settles[i] = p.settleCall(r.id, parts[i].Token, r.images[i], parts[i].Schema, parts[i].SchemaMin)
		calls[i] = settles[i].Call
	}
	sctx, cancel := node.clock.WithTimeout(ctx, node.cfg.SaveTimeout)
	sentAt := node.clock.Now()
	vals, errs := rscript.Run(sctx, node.rdb, calls)
	cancel()
	var settled []int
	for i, p := range r.parties {
		sres, serr := settles[i].Answer(vals[i], errs[i])
		res, err := p.settleResult(sres, serr, sentAt)
		switch {
		case err == nil:
			p.settled(res, r.images[i], r.notReplicated == nil)
			settled = append(settled, i)
		case errors.Is(err, ErrLockLost):
			p.loseLock(err) // its next owner settles it from the journal
		default:
			p.setPending(&pendingTrade{run: r, idx: i, applied: true}) // the next save settles it
			node.log.Warn("trade settle failed; the next save writes it", "trade", r.id, "key", p.tradeKey(), "err", err)
		}
	}
	if len(settled) > 0 {
		node.markSettled(r.journal, r.id, settled)
	}
}

// commit runs the commit CAS. When its answer is lost the trade may or may
// not have committed; an abort CAS then decides: it lands only if the commit
// did not, so a landed commit is never aborted afterwards.
func (r *tradeRun) commit(ctx context.Context) error {
	node := r.parties[0].tradeNode()
	var err error
	if want := node.cfg.MinReplicas; want > 0 {
		sctx, cancel := node.clock.WithTimeout(ctx, node.cfg.SaveTimeout+node.cfg.ReplicaTimeout)
		var acked int64
		select {
		case node.waitSlots <- struct{}{}: // a replica wait holds a pool connection (replicas.go)
			acked, err = r.journal.CommitWait(sctx, r.id, want, node.cfg.ReplicaTimeout)
			<-node.waitSlots
		case <-sctx.Done():
			err = sctx.Err()
		}
		cancel()
		if err == nil && acked < int64(want) {
			r.notReplicated = fmt.Errorf("trade %s committed, but %w: %d of %d replicas acknowledged the commit within %s",
				r.id, ErrNotReplicated, acked, want, node.cfg.ReplicaTimeout)
		}
	} else {
		sctx, cancel := node.clock.WithTimeout(ctx, node.cfg.SaveTimeout)
		err = r.journal.Commit(sctx, r.id)
		cancel()
	}
	if err == nil {
		r.setOutcome(outcomeCommitted)
		return nil
	}
	var se *tradejournal.StateError
	if errors.As(err, &se) { // a recovery aborted it first
		r.clearMarks(ctx, allTrue(len(r.parties)))
		return fmt.Errorf("trade %s: %w: %w", r.id, ErrTradeAborted, se)
	}
	sctx, cancel := node.clock.WithTimeout(context.WithoutCancel(ctx), node.cfg.SaveTimeout)
	aerr := r.journal.Abort(sctx, r.id)
	cancel()
	switch {
	case aerr == nil:
		r.clearMarks(ctx, allTrue(len(r.parties)))
		return fmt.Errorf("trade %s: %w: commit: %w", r.id, ErrTradeAborted, err)
	case errors.As(aerr, &se) && se.State == tradejournal.Committed:
		r.setOutcome(outcomeCommitted) // the commit landed; its answer was lost
		return nil
	}
	r.setOutcome(outcomeUnknown)
	for i, p := range r.parties {
		p.setPending(&pendingTrade{run: r, idx: i})
	}
	return fmt.Errorf("trade %s: %w: %w", r.id, ErrTradeOutcomeUnknown, err)
}

// abort gives the trade up: the journal entry to ABORTED (unless it was
// committed, which only the commit above can do), then every mark cleared.
// What fails is left for the profiles' next saves.
func (r *tradeRun) abort(ctx context.Context, marked []bool) {
	node := r.parties[0].tradeNode()
	ctx = context.WithoutCancel(ctx)
	sctx, cancel := node.clock.WithTimeout(ctx, node.cfg.SaveTimeout)
	defer cancel()
	var se *tradejournal.StateError
	if err := r.journal.Abort(sctx, r.id); errors.As(err, &se) && se.State == tradejournal.Committed {
		node.log.Error("trade abort: the journal says committed; leaving the marks for recovery", "trade", r.id)
		return
	} else if err != nil {
		// Unreachable journal: nobody can commit this trade but this
		// coordinator, which will not; the marks are cleared all the same.
		node.log.Warn("trade abort: journal not updated", "trade", r.id, "err", err)
	}
	r.clearMarks(ctx, marked)
}

// clearMarks drops the marks of an aborted trade (the journal already says
// so, or never will say otherwise); a mark that cannot be cleared now is
// cleared by its profile's next save.
func (r *tradeRun) clearMarks(ctx context.Context, marked []bool) {
	node := r.parties[0].tradeNode()
	sctx, cancel := node.clock.WithTimeout(context.WithoutCancel(ctx), node.cfg.SaveTimeout)
	defer cancel()
	r.setOutcome(outcomeAborted)
	var calls []rscript.Call
	var who []party
	for i, p := range r.parties {
		if marked[i] {
			token, _ := p.lockInfo()
			calls = append(calls, p.settleCall(r.id, token, nil, 0, 0).Call)
			who = append(who, p)
		}
	}
	_, errs := rscript.Run(sctx, node.rdb, calls)
	for i, p := range who {
		if errs[i] != nil {
			p.setPending(&pendingTrade{run: r})
		}
	}
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

// prepareResult turns prepare.lua's answer into the trade's error.
func prepareResult(key string, res record.PrepareResult, err error) error {
	if err != nil {
		return fmt.Errorf("prepare %q: %w", key, err)
	}
	switch res.Outcome {
	case record.PrepareLockLost:
		return fmt.Errorf("prepare %q: %w (the lock is held by %s)", key, ErrLockLost, res.Holder)
	case record.PrepareTradeHeld:
		return fmt.Errorf("prepare %q: %w (%s)", key, ErrTradePending, res.Trade)
	case record.PrepareBehind:
		return fmt.Errorf("prepare %q: the record is at version %d, ahead of this profile; save it first", key, res.Ver)
	}
	return nil
}

// markSettled records settled participants in the journal in the
// background, so that the entry can expire once all are.
func (n *Node) markSettled(j *tradejournal.Journal, id string, idx []int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := n.clock.WithTimeout(n.ctx, n.cfg.SaveTimeout)
		defer cancel()
		if err := j.MarkSettled(ctx, id, idx...); err != nil && n.ctx.Err() == nil {
			n.log.Warn("trade: could not mark participants settled; the journal entry stays", "trade", id, "err", err)
		}
	}()
}
