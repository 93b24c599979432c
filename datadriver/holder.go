package datadriver

// The holder side of cross-server handoff: requests from other servers for
// keys this driver holds, and the replies once it lets them go.

// request is a release request recorded until the key settles.
type request struct{ token, from string }

// HandleRequest implements lockhandoff.Holder: server from asks for key,
// naming the lock token it saw. A request naming a lock this driver does
// not hold now (a late one, after the player came back here under a new
// lock, or a forged one) is answered at once and changes nothing. Otherwise
// the requester is recorded and the lock is let go: a live session is ended
// (Kick with ReasonJoinedElsewhere, leave cleanups, release save), a
// retained profile retries its release now, and a load still in flight is
// answered when it settles. Every recorded requester gets a reply when the
// profile ends.
func (d *Driver[T]) HandleRequest(key, token, from string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loading[key] {
		d.pending[key] = append(d.pending[key], request{token, from})
		return
	}
	p := d.profiles[key]
	if p == nil || p.token != token || p.state == stateClosed {
		d.node.handoff.Reply(d.cfg.Name, key, from)
		return
	}
	p.requesters[from] = struct{}{}
	switch p.state {
	case stateActive:
		d.log.Info("another server asked for a live session; ending it", "key", key, "from", from)
		d.endSessionLocked(p, ReasonJoinedElsewhere)
	case stateRetained:
		if !p.saving {
			d.log.Info("another server asked for a retained profile; retrying its release", "key", key, "from", from)
			d.goTracked(func() { _ = p.release(d.ctx) })
		}
	}
	// stateLeaving, stateAdopting: the reply goes out when the profile ends.
}

// takePendingLocked returns the requests recorded while key was loading.
// d.mu must be held.
func (d *Driver[T]) takePendingLocked(key string) []request {
	reqs := d.pending[key]
	delete(d.pending, key)
	return reqs
}

// replyAllLocked tells every recorded requester that p's key is free. d.mu
// must be held.
func (d *Driver[T]) replyAllLocked(p *Profile[T]) {
	for from := range p.requesters {
		d.node.handoff.Reply(d.cfg.Name, p.key, from)
	}
	clear(p.requesters)
}
