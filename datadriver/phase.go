package datadriver

import (
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
	// FNV-1a of "<key>\x00<job>\x00<epoch>", hashed in place (fmt and a
	// hash.Hash cost a load three allocations).
	var num [20]byte
	h := fnv1a(fnvOffset, p.key)
	h = fnv1a(h, "\x00")
	h = fnv1a(h, p.d.node.jobID)
	h = fnv1a(h, "\x00")
	h = fnv1aBytes(h, strconv.AppendInt(num[:0], p.epoch.Load(), 10))
	return time.Duration(h % uint64(period))
}

// FNV-1a, 64 bits (hash/fnv's New64a, without its allocation).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func fnv1aBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}
