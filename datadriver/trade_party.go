package datadriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/internal/record"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/tradejournal"
)

// party is what a trade needs of a profile, whatever its T.
type party interface {
	TradeParty
	tradeNode() *Node
	tradeDriver() string
	tradeKey() string
	tradeRecord() string
	// enterTrade takes the profile for a trade: it borrows the profile's
	// owner (saves and releases wait), checks it is live, and sets the gate
	// that holds Update.
	enterTrade(ctx context.Context) error
	leaveTrade()
	copyForTrade() (any, error)
	imageOf(copy any) ([]byte, error)
	lockInfo() (token string, ver int64)
	settleCall(id, token string, img []byte, schema, schemaMin int) rscript.Pending[record.SaveResult]
	settleResult(res record.SaveResult, err error, sentAt time.Time) (writeRes, error)
	imageSchema() (schema, schemaMin int)
	applyImage(copy any, img []byte)
	settled(res writeRes, img []byte, replicated bool)
	setPending(pt *pendingTrade)
	loseLock(err error)
	// checkLease is nil while the profile may still change (see lease.go);
	// else it fences the profile and says why.
	checkLease() error
}

var _ party = (*Profile[struct{}])(nil)

// pendingTrade is a trade of a profile whose outcome is not yet in its
// record: the next save settles it (writing the data, which holds the
// image, and clearing the mark) or clears the mark of an aborted one.
type pendingTrade struct {
	run     *tradeRun
	idx     int  // the profile's place among the run's participants
	applied bool // the image is in the in-memory data
}

func (p *Profile[T]) tradeParty() party   { return p }
func (p *Profile[T]) tradeNode() *Node    { return p.d.node }
func (p *Profile[T]) tradeDriver() string { return p.d.cfg.Name }
func (p *Profile[T]) tradeKey() string    { return p.key }
func (p *Profile[T]) tradeRecord() string { return p.d.recordKey(p.key) }
func (p *Profile[T]) loseLock(err error)  { p.endWith(causeOr(err, causeTaken), err) }
func (p *Profile[T]) checkLease() error {
	err := p.leaseErr(p.d.node.clock.Now())
	p.fenceOn(err)
	return err
}
func (p *Profile[T]) lockInfo() (string, int64) {
	return p.lockToken(), p.w.ver
}

func (p *Profile[T]) enterTrade(ctx context.Context) error {
	entered := make(chan error, 1)
	leave := make(chan struct{})
	r := &request{ctx: ctx, done: make(chan error, 1), run: func(ctx context.Context) error {
		err := p.readyForTrade(ctx)
		if err == nil {
			p.extrasMade().tradeLeave = leave
		}
		entered <- err
		if err == nil {
			<-leave // the trade borrows the owner's state until it leaves
		}
		return err
	}}
	if err := p.enqueue(r); err != nil {
		return err
	}
	select {
	case err := <-entered:
		return err
	case err := <-r.done: // answered without running: the profile ended
		return err
	case <-ctx.Done():
		if p.withdraw(r) {
			return ctx.Err()
		}
	}
	// Once running, the entry answers within a bounded time (its writes are
	// bounded by SaveTimeout); not waiting for it would leave the executor
	// borrowed for good.
	select {
	case err := <-entered:
		return err
	case err := <-r.done:
		return err
	}
}

// readyForTrade brings the record in step with the profile before a trade
// (on the owner), checks the profile may trade, and sets the gate.
func (p *Profile[T]) readyForTrade(ctx context.Context) error {
	p.dataMu.Lock()
	// Messages applied but not saved must leave the inbox first: a trade
	// image written by another server's recovery would not delete them.
	x := p.extras()
	unsettled := x.pending() != nil || x.inFlight()
	p.dataMu.Unlock()
	// An earlier trade's mark must go first, and an adoption that has not
	// landed yet must move the lock to the profile's token.
	adopting := len(p.view().earlierTokens()) > 0
	if unsettled || adopting {
		if err := p.write(ctx, writeAutosave); err != nil {
			return fmt.Errorf("%w: the record is not in step with the profile: %w", ErrTradePending, err)
		}
	}
	if err := p.checkLease(); err != nil {
		return err
	}
	switch p.phaseNow() {
	case phaseEnded:
		return p.Err()
	case phaseLive:
	default:
		return fmt.Errorf("%w: the player has left", ErrReleased)
	}
	x = p.extrasMade()
	p.dataMu.Lock()
	x.gate = make(chan struct{})
	p.dataMu.Unlock()
	return nil
}

func (p *Profile[T]) leaveTrade() {
	x := p.extras() // made by the enter (as openGate's by closeGate)
	p.dataMu.Lock()
	if x.gate != nil {
		close(x.gate)
		x.gate = nil
	}
	p.dataMu.Unlock()
	leave := x.tradeLeave
	x.tradeLeave = nil
	close(leave)
}

func (p *Profile[T]) copyForTrade() (any, error) {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	v, err := p.d.codec.Clone(&p.data)
	return &v, err
}

// imageOf encodes the trade's copy with the fields the profile keeps for a
// newer build.
func (p *Profile[T]) imageOf(c any) ([]byte, error) {
	p.dataMu.RLock()
	unknown := p.extras().unknownData()
	p.dataMu.RUnlock()
	b, err := p.d.codec.Encode(c.(*T), unknown)
	if err != nil {
		return nil, err
	}
	if len(b) > p.d.cfg.MaxDataBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), p.d.cfg.MaxDataBytes)
	}
	return b, nil
}

func (p *Profile[T]) settleCall(id, token string, img []byte, schema, schemaMin int) rscript.Pending[record.SaveResult] {
	uids, meta := p.w.asStored()
	return p.d.writeCall(p.key, record.SaveArgs{Mode: record.ModeSettle, Seq: p.w.nextSeq(), Token: token, Trade: id, Data: img,
		Schema: schema, SchemaMin: schemaMin, Sum: record.RecordSum(img, schema, schemaMin, uids, meta)})
}

func (p *Profile[T]) settleResult(res record.SaveResult, err error, sentAt time.Time) (writeRes, error) {
	return p.d.writeResult(p.key, record.ModeSettle, res, err, sentAt)
}

// imageSchema is the schema version and min-reader a trade image of the
// profile is written with.
func (p *Profile[T]) imageSchema() (int, int) {
	return p.d.codec.WriteVersion(int(p.w.schema), int(p.w.schemaMin))
}

// applyImage makes the committed image the profile's data.
func (p *Profile[T]) applyImage(c any, _ []byte) {
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	p.data = *c.(*T)
}

// settled records a landed settle write (the trade borrows the owner);
// replicated: the trade's commit is on MinReplicas replicas.
func (p *Profile[T]) settled(res writeRes, img []byte, replicated bool) {
	if res.How == record.HowAlreadySettled {
		return
	}
	defer p.noteSaved(snapshot{}, false, false, replicated)
	p.w.ver, p.w.data = res.Ver, p.d.dig.storedOf(img)
	schema, schemaMin := p.imageSchema()
	p.w.schema, p.w.schemaMin = int32(schema), int32(schemaMin)
	p.w.stored = metaOf(record.KeptMeta{At: res.At, Schema: schema, SchemaMin: schemaMin})
	p.setEpoch(res.Epoch)
	p.landedAt(res.sentAt)
}

func (p *Profile[T]) setPending(pt *pendingTrade) {
	x := p.extrasMade()
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	x.unsettled = pt
}

// syncTradeLocked brings the data in line with a pending trade's outcome
// and reports whether updates may go ahead. dataMu must be held.
func (p *Profile[T]) syncTradeLocked() error {
	pt := p.extras().pending()
	if pt == nil {
		return nil
	}
	switch pt.run.getOutcome() {
	case outcomeCommitted:
		if !pt.applied {
			v, unknown, err := p.d.codec.Decode(pt.run.images[pt.idx], p.d.codec.Version())
			if err != nil {
				return fmt.Errorf("%w: trade image: %w", ErrCorruptRecord, err)
			}
			p.data, pt.applied = v, true
			p.setUnknown(unknown)
		}
	case outcomeUnknown, outcomeInFlight:
		return fmt.Errorf("%w: the outcome of trade %s is not known yet", ErrTradePending, pt.run.id)
	}
	return nil
}

// resolvePending learns the outcome of a pending trade whose commit answer
// was lost (from the journal, aborting it if it is still PREPARED) and
// returns the trade id the next write must clear ("" for none). On the
// owner (or a trade borrowing it).
func (p *Profile[T]) resolvePending(ctx context.Context) (string, error) {
	p.dataMu.Lock()
	pt := p.extras().pending()
	p.dataMu.Unlock()
	if pt == nil {
		return "", nil
	}
	r := pt.run
	if r.getOutcome() == outcomeUnknown {
		// Bounded like every write: the caller's ctx may have no deadline.
		actx, cancel := p.d.node.clock.WithTimeout(ctx, p.d.node.cfg.SaveTimeout)
		err := r.journal.Abort(actx, r.id)
		cancel()
		var se *tradejournal.StateError
		switch {
		case err == nil:
			r.setOutcome(outcomeAborted)
		case errors.As(err, &se) && se.State == tradejournal.Committed:
			r.setOutcome(outcomeCommitted)
		default:
			return "", fmt.Errorf("%w: trade %s: %w", ErrTradePending, r.id, err)
		}
	}
	p.dataMu.Lock()
	defer p.dataMu.Unlock()
	if err := p.syncTradeLocked(); err != nil {
		return "", err
	}
	return r.id, nil
}

// clearPending drops a pending trade once a write cleared its mark, and
// marks a committed one settled in the journal.
func (p *Profile[T]) clearPending(id string) {
	p.dataMu.Lock()
	pt := p.extras().pending()
	if pt != nil && pt.run.id == id {
		p.extras().unsettled = nil
	}
	p.dataMu.Unlock()
	if pt != nil && pt.run.id == id && pt.run.getOutcome() == outcomeCommitted {
		p.d.node.markSettled(pt.run.journal, id, []int{pt.idx})
	}
}
