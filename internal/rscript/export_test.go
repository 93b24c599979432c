package rscript

// Queued is how many calls wait in b's queue (tests).
func Queued(b *Batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
