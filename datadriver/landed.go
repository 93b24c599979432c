package datadriver

import "time"

// What landed: every write of a profile that lands is recorded as a Saved
// (Profile.LastSaved) and told to the game (Config.OnSaved), so that a game
// can grant what it must grant only once the grant is stored.

// Saved is a write of a profile that landed: what the record stores after
// it.
type Saved struct {
	// Key is the profile key.
	Key string
	// Ver is the record version of the stored data (Version.Ver): it grows
	// by one with each write that changed the data; a write of unchanged
	// data stores the version it had.
	Ver int64
	// At is when the stored data was written (Redis clock).
	At time.Time
	// Updates is how many of the session's Updates the stored data
	// includes: every Update that returned nil before Profile.Updates read
	// at most this number is stored (see Profile.Updates). A trade's settle
	// and a release of data over MaxDataBytes (stored with the last data
	// that fit) count none beyond the previous write's.
	Updates uint64
	// Replicated reports that the write is on MinReplicas replicas: always
	// when MinReplicas is 0; else when that many acknowledged it within
	// ReplicaTimeout. A Save, release or adoption that fewer acknowledged
	// returned an error matching ErrNotReplicated (the write stands on the
	// primary, but a failover may lose it); an autosave does not wait for
	// replicas and reports false; a trade's settle reports its commit's.
	Replicated bool
	// Released reports that the write was the release: it ended the
	// session and cleared the lock.
	Released bool
}

// LastSaved is the profile's last write that landed in this session (see
// Saved); the zero Saved before the first. It says what the record stores
// at least: a later write may have landed since it was read.
func (p *Profile[T]) LastSaved() Saved {
	if s := p.lastSaved.Load(); s != nil {
		return *s
	}
	return Saved{}
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
	prev := p.LastSaved()
	s := Saved{Key: p.key, Ver: p.w.ver, At: p.w.stored.At, Updates: prev.Updates, Replicated: replicated,
		Released: released}
	if withUpdates {
		s.Updates = max(snap.updates, prev.Updates)
	}
	p.lastSaved.Store(&s)
	if on := p.d.cfg.OnSaved; on != nil {
		p.d.callback(p.key, "OnSaved", func() { on(p.key, s) })
	}
}
