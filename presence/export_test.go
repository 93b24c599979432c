package presence

import "context"

// LoopBeat sends one beat as Start's loop does (the fast path, a full check
// every CheckEvery beats or after a failure), for benchmarks that drive many
// Presences without running their loops.
func LoopBeat(ctx context.Context, p *Presence) error {
	_, err := p.beat(ctx, true)
	return err
}
