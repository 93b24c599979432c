package datadriver

// presenceFlag reports whether this driver's locks carry presence=1: the
// Node beats presence and the driver has handoff on.
func (d *Driver[T]) presenceFlag() bool {
	return d.node.handoff.Active() && !d.cfg.DisableHandoff
}

// lockLost tells the game a profile lost its lock.
func (d *Driver[T]) lockLost(key string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lockLostLocked(key, err, ReasonLockLost)
}

// lockLostLocked tells the game, on a goroutine of its own, that a profile
// lost its lock, with the Kick reason. d.mu held.
func (d *Driver[T]) lockLostLocked(key string, err error, reason string) {
	d.goTracked(func() {
		if d.cfg.Kick != nil {
			d.cfg.Kick(key, reason)
		}
		if d.cfg.OnLockLost != nil {
			d.cfg.OnLockLost(key, err)
		}
	})
}
