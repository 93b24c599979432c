package rscript

// Queued is how many calls wait in b's queues (tests).
func Queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lanes {
		n += len(l.queue)
	}
	return n
}

// InFlight is how many round trips b has in flight (tests).
func InFlight(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lanes {
		n += l.inflight
	}
	return n
}

// Lanes is how many lanes b holds (tests).
func Lanes(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lanes)
}
