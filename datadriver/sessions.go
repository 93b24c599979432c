package datadriver

// A Node's session count, which its presence beat publishes
// (presence.Config.Sessions) for drains and for "playerdata presence".

// Sessions is how many sessions this Node has across its drivers: the
// profiles it holds (not a retained one, whose release is retried) and the
// loads in flight. Its presence beat publishes the count, which "playerdata
// presence" shows. It walks the profiles: O(profiles held).
func (n *Node) Sessions() int {
	n.mu.Lock()
	drivers := n.driversLocked()
	n.mu.Unlock()
	total := 0
	for _, d := range drivers {
		total += d.sessions(true)
	}
	return total
}

// beatSessions is Sessions for the presence beat, which must never queue
// behind the Node's own work (invariant 14): it takes no lock that is busy.
// A busy Node lock answers the count the beat last took; a busy driver lock,
// that driver's last count. Such a count is at most as old as the beat
// before, and the next beat carries the change.
func (n *Node) beatSessions() int {
	if !n.mu.TryLock() {
		return int(n.lastSessions.Load())
	}
	drivers := n.driversLocked()
	n.mu.Unlock()
	total := 0
	for _, d := range drivers {
		total += d.sessions(false)
	}
	n.lastSessions.Store(int64(total))
	return total
}

// sessions counts the driver's profiles held (live, leaving or adopting)
// and its keys loading. With wait false, a busy driver lock answers the
// count last taken instead of waiting for it.
func (d *Driver[T]) sessions(wait bool) int {
	if wait {
		d.mu.Lock()
	} else if !d.mu.TryLock() {
		return int(d.lastSessions.Load())
	}
	n := 0
	for _, p := range d.profiles {
		if isSession(p.phaseNow()) {
			n++
		}
	}
	for key := range d.loading {
		if p := d.profiles[key]; p == nil || !isSession(p.phaseNow()) {
			n++
		}
	}
	d.mu.Unlock()
	d.lastSessions.Store(int64(n))
	return n
}

// isSession reports whether a profile in phase ph is a session.
func isSession(ph phase) bool {
	return ph == phaseLive || ph == phaseLeaving || ph == phaseAdopting
}
