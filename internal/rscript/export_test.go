package rscript

// Queued is how many calls wait in b's queue (tests).
func Queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// InFlight is how many round trips b has in flight (tests).
func InFlight(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight
}
