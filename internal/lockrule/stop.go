package lockrule

import (
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// Stop is what one reader knows of one holder's silence: the proof that it
// stopped, built from its presence readings in the order they were
// answered. The rule:
//
//   - a Stopped reading starts the silence (at the moment it was answered)
//     or continues it;
//   - any other reading (Alive, or Unknown for any reason: a failed read, a
//     Redis restart or failover younger than one TTL, a clock step, another
//     shard count in use) ends it: unknown never counts as stopped;
//   - the holder is proven stopped once a Stopped reading is answered at
//     least one Beat after the first of an unbroken run of them: two reads a
//     Beat apart, nothing else between;
//   - every later Stopped reading proves it again, as of when that reading
//     was sent.
//
// A proof covers the locks the holder wrote before the proving read was sent
// (Covers): a live server writes only under its presence lease, which ends
// before its beat expires, so a lock written before a read that found no
// live beat belongs to a session that fenced itself, and its token is dead
// whatever the holder does later. The zero Stop knows nothing. Times are on
// the reader's own (monotonic) clock, never compared with another
// machine's.
type Stop struct {
	// firstStopped is when the first of the unbroken Stopped readings was
	// answered (zero: none); provenSent when the latest reading that proved
	// the stop was sent (zero: not proven).
	firstStopped, provenSent time.Time
}

// Fold records reading r, sent at sent and answered at now, with beat the
// servers' Beat, and reports whether this reading completed a proof that
// was not standing before.
func (s *Stop) Fold(r presencecore.Reading, sent, now time.Time, beat time.Duration) (newlyProven bool) {
	if r.Status != presencecore.Stopped {
		*s = Stop{}
		return false
	}
	if s.firstStopped.IsZero() {
		s.firstStopped = now
	}
	if !s.provenSent.IsZero() {
		s.provenSent = sent // every later stopped read proves it again, for locks written since
		return false
	}
	if now.Sub(s.firstStopped) >= beat {
		s.provenSent = sent
		return true
	}
	return false
}

// Proven returns when the read that proved the holder stopped was sent, and
// whether it is proven.
func (s Stop) Proven() (sent time.Time, ok bool) { return s.provenSent, !s.provenSent.IsZero() }

// Covers reports whether the proof covers a lock last written at writtenBy
// (the reader's clock): it stands, and its proving read was sent after the
// lock was written.
func (s Stop) Covers(writtenBy time.Time) bool {
	return !s.provenSent.IsZero() && writtenBy.Before(s.provenSent)
}

// ProvesAt is the earliest a Stopped reading can complete the proof (the
// first stopped reading's answer plus beat); zero when no stopped reading
// stands or the proof stands already.
func (s Stop) ProvesAt(beat time.Duration) time.Time {
	if s.firstStopped.IsZero() || !s.provenSent.IsZero() {
		return time.Time{}
	}
	return s.firstStopped.Add(beat)
}

// SilentSince is when the unbroken run of Stopped readings began (zero:
// none).
func (s Stop) SilentSince() time.Time { return s.firstStopped }
