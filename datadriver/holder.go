package datadriver

// The holder side of cross-server handoff: another server asks for a key
// this driver holds, naming the lock token it saw. The driver lets the lock
// go and hands lockhandoff a channel that closes once it has; lockhandoff
// tracks who asked and replies.

// closed is a channel that is already closed: the answer for a lock this
// driver does not hold.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// loadRequest is a release request for a key still loading on this Node:
// it is answered once the load settles (the load may be taking the very
// lock the requester saw).
type loadRequest struct {
	token    string
	purpose  string // what the request is for (see lockhandoff.ReleaseFunc)
	released chan struct{}
}

// releaseFor is the driver's lockhandoff.ReleaseFunc. A request naming
// another lock than the live session's of the key (a late one, after the
// player came back here under a new lock, or a forged one) changes nothing
// and is answered at once. A request for a key no session or load of this
// driver has names a lock nobody here answers for (see releaseOrphanLocked):
// it is given back. Otherwise the lock is let go: a live session is ended (Kick with
// ReasonJoinedElsewhere, or ReasonRestored for a restore's request; leave
// cleanups, release save), a retained profile
// retries its release now, and a load still in flight is answered when it
// settles. The channel closes when the profile ends.
func (d *Driver[T]) releaseFor(key, token, purpose string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.moveReleaseLocked(key, token, purpose); ok {
		return ch // a move to this Node is pending under that token
	}
	if d.loading[key] {
		r := loadRequest{token: token, purpose: purpose, released: make(chan struct{})}
		d.loadRequests[key] = append(d.loadRequests[key], r)
		return r.released
	}
	return d.releaseLocked(key, token, purpose)
}

// releaseLocked lets key's lock go if it is token's, for a load made for
// purpose; d.mu held.
func (d *Driver[T]) releaseLocked(key, token, purpose string) <-chan struct{} {
	p := d.profiles[key]
	if p == nil {
		return d.releaseOrphanLocked(key, token)
	}
	v := p.view()
	if v.token != token || p.phaseNow() == phaseEnded {
		return closed
	}
	switch p.phaseNow() {
	case phaseLive:
		// Its executor ends it (a session whose lease has passed is fenced
		// there instead: no leave cleanup, no release).
		p.askLeave(askedFor(purpose), v.gen)
	case phaseRetained:
		d.log.Info("another server asked for a retained profile; retrying its release", "key", key)
		p.releaseNow()
	}
	// Leaving, adopting: it ends when its write settles.
	return p.doneLocked()
}

// answerLoadRequestsLocked answers the requests that arrived while key was
// loading, now that the load settled. d.mu held.
func (d *Driver[T]) answerLoadRequestsLocked(key string) {
	reqs := d.loadRequests[key]
	delete(d.loadRequests, key)
	for _, r := range reqs {
		released := d.releaseLocked(key, r.token, r.purpose)
		select {
		case <-released:
			close(r.released)
			continue
		default:
		}
		if !d.goTracked(func() {
			select {
			case <-released:
			case <-d.ctx.Done():
			}
			close(r.released)
		}) {
			close(r.released)
		}
	}
}

// releaseOrphanLocked gives back key's lock if it still carries token, for
// a request naming a lock of this server that no session or load of this
// driver uses (see orphans.go: the work a forged request can cost is
// bounded). The release is fenced by token and writes no data. The channel
// closes once the attempt settles, or at once when the request is dropped.
// d.mu held.
func (d *Driver[T]) releaseOrphanLocked(key, token string) <-chan struct{} {
	return d.orphans.ask(key, token)
}
