package datadriver

import (
	"hash/fnv"
	"strconv"
	"time"
)

// phase0 is the profile's offset in [0, period) for its first autosave,
// spread by a hash of its key, server and epoch: profiles loaded together
// save at different times, and a replayed run saves at the same ones.
func (p *Profile[T]) phase0(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	// FNV-1a of "<key>\x00<job>\x00<epoch>", the bytes built in one
	// buffer (fmt cost a load two more allocations).
	b := make([]byte, 0, len(p.key)+len(p.d.node.jobID)+22)
	b = append(append(append(append(b, p.key...), 0), p.d.node.jobID...), 0)
	h := fnv.New64a()
	_, _ = h.Write(strconv.AppendInt(b, p.view().epoch, 10))
	return time.Duration(h.Sum64() % uint64(period))
}
