package datadriver

import (
	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/record"
)

// What most sessions never use lives apart from the Profile, made when
// first set: a trade's state, the leave cleanups, the user ids and
// metadata, the inbox messages in flight, the fields of a newer build.
// A resident profile that uses none of it carries one nil pointer for each
// part instead of their 240 bytes (issue 35: a resident profile's heap).
// A part, once made, stays: it is never swapped, so the fields in it keep
// the locks they had in the Profile.

// extras is the game's side of what few sessions use. Made when first set
// (Profile.extrasMade) and never replaced; nil reads as all empty, through
// the nil-safe getters below. Each field is guarded as it was in the
// Profile: by dataMu unless it says otherwise.
type extras[T any] struct {
	// unknown is what the stored data holds that T does not know (a newer
	// build's fields): written back with every save.
	unknown *datacodec.Unknown
	// applied are the ids of inbox messages applied to data that no landed
	// save has written yet (the next save deletes them from the inbox);
	// refused the refusals no landed save has counted yet.
	applied []string
	refused []record.Refusal
	uids    []string
	meta    map[string]string
	// metaGen counts changes of uids and meta; metaSaved is the count the
	// last landed save wrote.
	metaGen, metaSaved uint64
	// cleanups are the leave cleanups (OnRelease).
	cleanups []func(*T)
	// gate is set while a trade of the profile runs (Update waits for it to
	// close); unsettled is a trade whose outcome is not in the record yet.
	gate      chan struct{}
	unsettled *pendingTrade
	// tradeLeave is closed when the trade borrowing the executor leaves
	// (the executor's, not under dataMu).
	tradeLeave chan struct{}
}

// extras is the profile's extras, or nil when none was ever set: read it
// through the nil-safe getters.
func (p *Profile[T]) extras() *extras[T] { return p.ext.Load() }

// extrasMade is the profile's extras, made now if none was: for a change.
// Two first changes under different locks make one part (the second's is
// dropped), so no field is ever written where another writer cannot see it.
func (p *Profile[T]) extrasMade() *extras[T] {
	if x := p.ext.Load(); x != nil {
		return x
	}
	p.ext.CompareAndSwap(nil, new(extras[T]))
	return p.ext.Load()
}

// unknownData is x.unknown; nil for nil.
func (x *extras[T]) unknownData() *datacodec.Unknown {
	if x == nil {
		return nil
	}
	return x.unknown
}

// inFlight reports whether messages were applied or refused since the last
// landed write.
func (x *extras[T]) inFlight() bool {
	return x != nil && (len(x.applied) > 0 || len(x.refused) > 0)
}

// tradeGate is x.gate: set while a trade of the profile runs.
func (x *extras[T]) tradeGate() chan struct{} {
	if x == nil {
		return nil
	}
	return x.gate
}

// pending is x.unsettled: a trade whose outcome is not in the record yet.
func (x *extras[T]) pending() *pendingTrade {
	if x == nil {
		return nil
	}
	return x.unsettled
}

// setUnknown sets what the data holds that T does not know, making the
// extras only for one that holds something (or to clear one set before).
func (p *Profile[T]) setUnknown(u *datacodec.Unknown) {
	if u == nil && p.ext.Load() == nil {
		return
	}
	p.extrasMade().unknown = u
}

// writerExtras is the executor's side of what few sessions use (writer.x):
// made when first set, owned by the executor as the writer is.
type writerExtras struct {
	// uids and meta are the user ids and metadata as stored (encoded): the
	// record's checksum covers them with the data.
	uids, meta []byte
	// joinedTo is the last message the join's acquire read (its page of
	// the inbox was applied before the join returned).
	joinedTo string
	// retry is when refused messages are tried again (msgretry.go).
	retry inboxRetry
	// inboxSeq is how many messages were ever sent to the profile, as the
	// last load or save saw it; seenSeq what the last pull saw (both 0
	// while no message was ever sent: no part is made for them).
	inboxSeq, seenSeq int64
	// refreshRetry is no refresh before this (the last one failed); 0:
	// none failed.
	refreshRetry instant
	// flags are the writer's rare flags (has, set).
	flags writerFlag
}

// writerFlag is one of the executor's rare flags, kept in its extras.
type writerFlag uint8

const (
	// flagCorrupt: a profile loaded for RestoreAt whose stored data does
	// not decode; it never writes its data, only a restored version.
	flagCorrupt writerFlag = 1 << iota
	// flagKeepNext: the next data write keeps the data it replaces (a
	// restore's).
	flagKeepNext
	// The broken keys logged already (history, a version skipped, inbox).
	flagWarnedHistory
	flagWarnedVersion
	flagWarnedInbox
)

// has reports whether f is set (none is without the part).
func (w *writer) has(f writerFlag) bool { return w.x != nil && w.x.flags&f != 0 }

// set sets f on or off, making the part only to set one.
func (w *writer) set(f writerFlag, on bool) {
	switch {
	case on:
		w.made().flags |= f
	case w.x != nil:
		w.x.flags &^= f
	}
}

// refreshRetryAt is no refresh before this; 0: none failed.
func (w *writer) refreshRetryAt() instant {
	if w.x == nil {
		return 0
	}
	return w.x.refreshRetry
}

// inboxSeqs are x.inboxSeq and x.seenSeq; 0, 0 without the part.
func (w *writer) inboxSeqs() (seq, seen int64) {
	if w.x == nil {
		return 0, 0
	}
	return w.x.inboxSeq, w.x.seenSeq
}

// inboxBehind reports whether messages were sent that the last pull did
// not see.
func (w *writer) inboxBehind() bool {
	seq, seen := w.inboxSeqs()
	return seq > seen
}

// setInboxSeqs sets the two counters, making the part only when one is not
// 0.
func (w *writer) setInboxSeqs(seq, seen int64) {
	if seq == 0 && seen == 0 && w.x == nil {
		return
	}
	x := w.made()
	x.inboxSeq, x.seenSeq = seq, seen
}

// setSeenSeq sets what the last pull saw.
func (w *writer) setSeenSeq(seen int64) {
	seq, _ := w.inboxSeqs()
	w.setInboxSeqs(seq, seen)
}

// made is the writer's extras, made now if none was.
func (w *writer) made() *writerExtras {
	if w.x == nil {
		w.x = new(writerExtras)
	}
	return w.x
}

// asStored is the user ids and metadata as stored (encoded); nil when none
// are.
func (w *writer) asStored() (uids, meta []byte) {
	if w.x == nil {
		return nil, nil
	}
	return w.x.uids, w.x.meta
}

// setStored records the user ids and metadata as stored.
func (w *writer) setStored(uids, meta []byte) {
	if uids == nil && meta == nil && w.x == nil {
		return
	}
	x := w.made()
	x.uids, x.meta = uids, meta
}

// joinedTo is the last message the join's acquire read ("": none).
func (w *writer) joinedTo() string {
	if w.x == nil {
		return ""
	}
	return w.x.joinedTo
}

// retryState is the retries' state, nil while no refusal was counted.
func (w *writer) retryState() *inboxRetry {
	if w.x == nil {
		return nil
	}
	return &w.x.retry
}
