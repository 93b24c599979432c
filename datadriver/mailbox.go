package datadriver

// The mailbox's queue of requests: a ring linked by next, held by its last
// request (mailbox.last), so that the first is last.next. A request is in
// at most one queue; its next is nil while it is in none. p.mb.mu held for
// all of these.

// queued reports whether a request is queued.
func (m *mailbox) queued() bool { return m.last != nil }

// push queues r last.
func (m *mailbox) push(r *request) {
	if m.last == nil {
		r.next = r
	} else {
		r.next, m.last.next = m.last.next, r
	}
	m.last = r
}

// pop takes the first request off the queue; nil when none is queued.
func (m *mailbox) pop() *request {
	if m.last == nil {
		return nil
	}
	r := m.last.next
	if r == m.last {
		m.last = nil
	} else {
		m.last.next = r.next
	}
	r.next = nil
	return r
}

// remove takes r off the queue and reports whether it was queued.
func (m *mailbox) remove(r *request) bool {
	if m.last == nil || r.next == nil {
		return false
	}
	prev := m.last
	for q := prev.next; ; prev, q = q, q.next {
		if q == r {
			break
		}
		if q == m.last {
			return false // in another queue
		}
	}
	switch {
	case r.next == r:
		m.last = nil
	case r == m.last:
		prev.next, m.last = r.next, prev
	default:
		prev.next = r.next
	}
	r.next = nil
	return true
}
