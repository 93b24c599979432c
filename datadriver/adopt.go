package datadriver

import (
	"context"
	"fmt"
	"slices"

	"github.com/ckernel/playerdata/internal/record"
)

// adopt re-asserts a retained profile for a rejoin, on its executor: a
// write runs at once under a fresh token (an adoption is a new session, so
// a late request naming the old lock cannot end it). It reports whether the
// rejoin gets the profile: only when the lock is proven ours, by the write
// landing or, when its answer is lost, by a read finding one of our tokens
// on it. When the lock is gone the profile ends and the caller loads the
// record normally. When neither can be told (Redis does not answer, or the
// lock is free after a release of ours whose answer was lost), the rejoin
// fails with the write's error and the profile stays retained, its release
// retried: a rejoin handed a profile whose lock another server may take as
// soon as Redis answers would run it twice. The key was reserved for the
// adoption (reserve); adopt settles the reservation.
func (d *Driver[T]) adopt(ctx context.Context, p *Profile[T]) (bool, error) {
	adopted := false
	err := p.do(ctx, func(ctx context.Context) error {
		var err error
		adopted, err = p.adoptOnOwner(ctx)
		if !adopted {
			p.unadopt()
		}
		return err
	})
	d.mu.Lock()
	d.settleLocked(p.key)
	d.mu.Unlock()
	if err != nil && p.ended.Load() != nil {
		return false, nil // it ended before its turn (its retried release landed): load the record
	}
	return adopted, err
}

// adoptOnOwner is adopt's work on the profile's executor (owner.go).
func (p *Profile[T]) adoptOnOwner(ctx context.Context) (bool, error) {
	d := p.d
	if p.phaseNow() != phaseRetained {
		return false, nil // it ended (its retried release landed): load the record
	}
	token, err := d.node.newToken()
	if err != nil {
		return false, err
	}
	p.beginAdopt(token)

	err = p.write(ctx, writeAdopt)
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
	// answer was lost. A read tells them apart when Redis answers.
	switch own, holder := d.lockOwner(ctx, p); own {
	case lockOurs:
		if !p.adopted() {
			return false, nil
		}
		d.log.Warn("rejoin adopted the retained profile; its write's answer was lost, the lock is ours and autosave writes the data",
			"key", p.key, "err", err)
		return true, nil
	case lockElsewhere:
		err := fmt.Errorf("adopt %q: %w (the lock is held by %s)", p.key, ErrLockLost, holder)
		p.endWith(causeTaken, err)
		d.log.Warn("retained profile lost its lock; loading the record", "key", p.key, "err", err)
		return false, nil
	}
	d.log.Warn("rejoin refused: the retained profile's lock cannot be proven ours; its release is retried",
		"key", p.key, "err", err)
	return false, fmt.Errorf("adopt %q: %w", p.key, err)
}

// lockOwnership is what a read of a retained profile's lock found.
type lockOwnership int

const (
	lockUnknown   lockOwnership = iota // Redis did not answer, or the lock is free after a release of ours
	lockOurs                           // it carries one of the profile's tokens
	lockElsewhere                      // another session holds it, or came and went
)

// lockOwner reads the lock of p's record (a read, not a state change) and
// says whose it is, with the holder's JobID when it is another server's.
func (d *Driver[T]) lockOwner(ctx context.Context, p *Profile[T]) (lockOwnership, string) {
	rctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	f, err := d.node.rdb.HMGet(rctx, d.recordKey(p.key), record.FieldLockToken, record.FieldLockJob, record.FieldReleased).Result()
	if err != nil {
		return lockUnknown, ""
	}
	token, job, released := fieldString(f[0]), fieldString(f[1]), fieldString(f[2])
	v := p.view()
	ours := func(t string) bool { return t == v.token || slices.Contains(v.earlierTokens(), t) }
	switch {
	case token == "" && (released == "" || ours(released)):
		return lockUnknown, "" // free, and the last release was ours: anyone may take it
	case token == "":
		return lockElsewhere, "nobody (another session came and went)"
	case ours(token):
		return lockOurs, ""
	}
	return lockElsewhere, job
}

// maxEarlierTokens bounds the earlier tokens a profile keeps while its
// adoptions have not landed.
const maxEarlierTokens = 8

// fieldString is a field HMGET read: "" for an absent one.
func fieldString(v any) string {
	s, _ := v.(string)
	return s
}
