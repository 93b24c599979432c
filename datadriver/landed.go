package datadriver

import "time"

// What landed: every write of a profile that lands is recorded as a Saved
// (Profile.LastSaved) and told to the game (Config.OnSaved), so that a game
// can grant what it must grant only once the grant is stored.

// Saved is a write of a profile that landed: what the record stores after
// it.
type Saved struct {
	Key string    // the profile key
	Ver int64     // the stored data's record version (Version.Ver), grown by each write that changed it
	At  time.Time // when the stored data was written (Redis clock)
	// Updates is how many of the session's Updates the stored data
	// includes (see Profile.Updates).
	Updates uint64
	// Replicated: the write is on MinReplicas replicas (always so when it
	// is 0). A Save, release or adoption that fewer acknowledged answered
	// ErrNotReplicated; an autosave does not wait and reports false.
	Replicated bool
	Released   bool // the write was the release: it ended the session and cleared the lock
}

// LastSaved is the profile's last write that landed in this session (see
// Saved); the zero Saved before the first. It says what the record stores
// at least: a later write may have landed since it was read.
func (p *Profile[T]) LastSaved() Saved {
	if l := p.lastSaved.Load(); l != nil {
		return l.saved(p.key)
	}
	return Saved{}
}

// landing is a Saved as the profile keeps it: without the key the profile
// has, the time as an integer, the two flags in the Updates count's top
// bits (24 bytes where a Saved takes 64, on every resident profile).
type landing struct {
	ver   int64
	at    int64  // wallNS: Unix ns
	count uint64 // Updates, with landedReplicated and landedReleased
}

// The flags of a landing's count; an Updates count never nears them (2^62
// Updates, at a billion a second, take 146 years).
const (
	landedReplicated uint64 = 1 << 63
	landedReleased   uint64 = 1 << 62
	landedUpdates           = landedReleased - 1
)

// newLanding is a landing of version ver written at at, including updates
// Updates (at most 2^62 - 1, as held).
func newLanding(ver, at int64, updates uint64, replicated, released bool) *landing {
	l := &landing{ver: ver, at: at, count: min(updates, landedUpdates)}
	if replicated {
		l.count |= landedReplicated
	}
	if released {
		l.count |= landedReleased
	}
	return l
}

// updates is how many Updates the stored data includes.
func (l *landing) updates() uint64 { return l.count & landedUpdates }

// saved is l as the Saved of key.
func (l *landing) saved(key string) Saved {
	return Saved{Key: key, Ver: l.ver, At: wallTime(l.at), Updates: l.updates(),
		Replicated: l.count&landedReplicated != 0, Released: l.count&landedReleased != 0}
}

// Updates is how many Updates of the session have succeeded so far. Read it
// right after an Update returns: once a Saved (LastSaved, OnSaved) counts
// at least that many, the Update's change is stored.
func (p *Profile[T]) Updates() uint64 { return p.updates.Load() }

// noteSaved records a landed write of the profile, made from snap, and
// tells OnSaved. withUpdates: the stored data is snap's (it includes its
// Updates). Runs on the owner (or a trade borrowing it), so writes are
// noted in the order they landed.
func (p *Profile[T]) noteSaved(snap snapshot, withUpdates, released, replicated bool) {
	var updates uint64
	if prev := p.lastSaved.Load(); prev != nil {
		updates = prev.updates()
	}
	if withUpdates {
		updates = max(snap.updates, updates)
	}
	l := newLanding(p.w.ver, p.w.stored.at, updates, replicated, released)
	p.lastSaved.Store(l)
	if on := p.d.cfg.OnSaved; on != nil {
		s := l.saved(p.key)
		p.d.callback(p.key, "OnSaved", func() { on(p.key, s) })
	}
}
