package datadriver

// SetMoveHook makes d call f at each point of a move of its profiles
// ("prepared", "accepted", "flipped"), on the moving profile's owner: a
// test stops there, crashes a server, or lets the move go on.
func SetMoveHook[T any](d *Driver[T], f func(point string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.moves.hook = f
}
