package datadriver

import (
	"context"
	"fmt"
	"slices"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// adopt re-asserts a retained profile for a rejoin, on its owner: a write
// runs at once under a fresh token (an adoption is a new session, so a late
// request naming the old lock cannot end it). It reports whether the rejoin
// gets the profile: the write landed, or it failed for a reason other than
// a lost lock (the player keeps playing on the retained profile, which is
// the newest copy, and autosave keeps retrying). When the lock is gone the
// profile ends and the caller loads the record normally.
func (d *Driver[T]) adopt(ctx context.Context, p *Profile[T]) (bool, error) {
	adopted := false
	err := p.do(ctx, func(ctx context.Context) error {
		var err error
		adopted, err = p.adoptOnOwner(ctx)
		return err
	})
	if err != nil && p.ended.Load() != nil {
		return false, nil // it ended before its turn (its retried release landed): load the record
	}
	if err != nil {
		p.setPhase(phaseRetained)
	}
	return adopted, err
}

// adoptOnOwner is adopt's work on the owner goroutine.
func (p *Profile[T]) adoptOnOwner(ctx context.Context) (bool, error) {
	d := p.d
	if p.ended.Load() != nil {
		return false, nil
	}
	token, err := d.node.newToken()
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	// The lock may still carry any token of adoptions that never landed; keep
	// the last few (each failed rejoin adds one).
	p.earlier = append(p.earlier, p.token)
	if len(p.earlier) > maxEarlierTokens {
		p.earlier = p.earlier[len(p.earlier)-maxEarlierTokens:]
	}
	p.token = token // requests naming the old lock are late now
	d.mu.Unlock()

	err = p.write(ctx, record.ModeSave, telemetry.WriteAdopt)
	switch {
	case err == nil:
		if !p.adopted() {
			return false, nil // it ended meanwhile (fenced): load the record
		}
		d.log.Info("rejoin adopted the retained profile", "key", p.key)
		return true, nil
	case causeOf(err) != causeNone:
		d.log.Warn("retained profile lost its lock; loading the record", "key", p.key, "err", err)
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	// The write failed without saying why: the backend is down, or its
	// answer was lost. A read tells the two apart when Redis answers: a lock
	// that another server holds now means the retained copy is no longer
	// the newest, and the record must be loaded (and its holder asked)
	// instead.
	if holder, ok := d.heldElsewhere(ctx, p); ok {
		err := fmt.Errorf("adopt %q: %w (the lock is held by %s)", p.key, ErrLockLost, holder)
		p.endWith(causeTaken, err)
		d.log.Warn("retained profile lost its lock; loading the record", "key", p.key, "err", err)
		return false, nil
	}
	if !p.adopted() {
		return false, nil
	}
	d.log.Warn("rejoin adopted the retained profile but its write failed; autosave keeps retrying",
		"key", p.key, "err", err)
	return true, nil
}

// adopted makes the adopted profile a new live session: no leave, no Kick
// heard yet, no leave cleanups. It reports false when the profile ended
// meanwhile (its lease lapsed while the adoption ran).
func (p *Profile[T]) adopted() bool {
	p.dataMu.Lock()
	p.cleanups = nil
	p.dataMu.Unlock()
	p.d.mu.Lock()
	defer p.d.mu.Unlock()
	if p.phaseNow() == phaseEnded {
		return false
	}
	p.leaveBy, p.kicked = causeNone, false
	p.setPhaseLocked(phaseLive)
	return true
}

// heldElsewhere reads the lock of p's record and reports whether another
// session holds it (a read, not a state change); false when Redis does not
// answer.
func (d *Driver[T]) heldElsewhere(ctx context.Context, p *Profile[T]) (string, bool) {
	rctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	f, err := d.node.rdb.HMGet(rctx, d.recordKey(p.key), record.FieldLockToken, record.FieldLockJob, record.FieldReleased).Result()
	if err != nil {
		return "", false
	}
	token, job, released := fieldString(f[0]), fieldString(f[1]), fieldString(f[2])
	d.mu.Lock()
	defer d.mu.Unlock()
	ours := func(t string) bool { return t == p.token || slices.Contains(p.earlier, t) }
	switch {
	case token == "" && (released == "" || ours(released)):
		return "", false // free, and the last release was ours: the next save retakes it
	case token == "":
		return "nobody (another session came and went)", true
	case ours(token):
		return "", false
	}
	return job, true
}

// maxEarlierTokens bounds the earlier tokens a profile keeps while its
// adoptions have not landed.
const maxEarlierTokens = 8

// fieldString is a field HMGET read: "" for an absent one.
func fieldString(v any) string {
	s, _ := v.(string)
	return s
}
