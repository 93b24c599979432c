package datadriver

// The driver's maps of keys are its mutex's (Driver.mu): the profiles
// held, the loads in flight (a key's reservation), the loads waiting on a
// key and the moves here. A profile's own state is its executor's
// (life.go); these read and change the maps only.

// lookup is key's profile on this Node (live, leaving, retained or
// adopting), or nil.
func (d *Driver[T]) lookup(key string) *Profile[T] {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.profiles[key]
}

// held lists the profiles this Node holds now.
func (d *Driver[T]) held() []*Profile[T] {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*Profile[T], 0, len(d.profiles))
	for _, p := range d.profiles {
		out = append(out, p)
	}
	return out
}

// notify wakes every load waiting on key. d.mu must be held.
func (d *Driver[T]) notify(key string) {
	if ch, ok := d.waits[key]; ok {
		close(ch)
		delete(d.waits, key)
	}
}

// waitCh is closed at key's next change. d.mu must be held.
func (d *Driver[T]) waitCh(key string) <-chan struct{} {
	ch, ok := d.waits[key]
	if !ok {
		ch = make(chan struct{})
		d.waits[key] = ch
	}
	return ch
}

// settleLocked ends key's reservation (a load or an adoption settled):
// the loads waiting on key wake, and the release requests that came
// meanwhile are answered. d.mu held.
func (d *Driver[T]) settleLocked(key string) {
	delete(d.loading, key)
	d.notify(key)
	d.answerLoadRequestsLocked(key)
}
