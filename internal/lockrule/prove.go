package lockrule

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// Presence is what the rule reads: presence as the servers read it (a
// *presencecore.Presence of the servers' hash, key, shard count and TTL).
type Presence interface {
	// Read reads one server's presence (see presencecore.Presence.Read).
	Read(ctx context.Context, jobID string) presencecore.Reading
	// List lists every server of every shard.
	List(ctx context.Context) ([]presencecore.Entry, error)
	// Config is the reader's configuration (its shard count).
	Config() presencecore.Config
}

// maxProofReads bounds the reads of one proof: two suffice (the second a
// Beat after the first), a third covers a second that came back early.
const maxProofReads = 4

// proof is one holder's proof in the making.
type proof struct {
	job   string
	stop  Stop
	last  presencecore.Reading
	reads int
}

// prove reads the presence of every job until each is proven stopped by
// reads sent after writtenBy (all true), or one reads otherwise: the proof
// of lockrule's rule (Stop), for a caller that reads once and acts (the
// operator's verbs), not a Node's shared prover. It waits one beat between
// two rounds of reads, so a stop takes about one Beat to prove; an alive or
// unknown reading ends it at once. It returns the proofs, every job's, and
// ctx.Err() when ctx ends first.
func prove(ctx context.Context, p Presence, clk clock.Clock, jobs []string, beat time.Duration,
	writtenBy time.Time) (all bool, proofs []*proof, err error) {
	proofs = make([]*proof, len(jobs))
	for i, j := range jobs {
		proofs[i] = &proof{job: j}
	}
	for range maxProofReads {
		var due time.Time
		for _, pf := range proofs {
			if pf.stop.Covers(writtenBy) {
				continue
			}
			sent := clk.Now()
			pf.last = p.Read(ctx, pf.job)
			if err := ctx.Err(); err != nil {
				return false, proofs, err
			}
			pf.reads++
			pf.stop.Fold(pf.last, sent, clk.Now(), beat)
			if pf.last.Status != presencecore.Stopped {
				return false, proofs, nil
			}
			if !pf.stop.Covers(writtenBy) {
				at := pf.stop.ProvesAt(beat)
				if at.IsZero() { // proven by a read sent before the lock was written: read again
					at = clk.Now()
				}
				due = later(due, at)
			}
		}
		if due.IsZero() {
			return true, proofs, nil
		}
		if err := sleepUntil(ctx, clk, due); err != nil {
			return false, proofs, err
		}
	}
	return false, proofs, nil
}

// later is the later of a and b, zero counting as none.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sleepUntil waits on clk until t, or until ctx ends.
func sleepUntil(ctx context.Context, clk clock.Clock, t time.Time) error {
	d := t.Sub(clk.Now())
	if d <= 0 {
		return nil
	}
	tm := clk.Timer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
