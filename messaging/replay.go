package messaging

import (
	"sync"
	"time"
)

const (
	// replayCacheMax bounds the MACs a bus with a key remembers: about
	// 3 MiB, two thousand signed messages a second received for the 30 s of
	// the default window. Only messages whose MAC verifies are remembered,
	// so only servers holding the key can fill it; past it the oldest are
	// forgotten first (see replayCache).
	replayCacheMax = 1 << 16
	// replayBuckets is how many slices of the window the cache forgets at a
	// time.
	replayBuckets = 16
)

// replayCache remembers the MAC of every signed message a bus delivered
// while its stamp is within the replay window, so that the same message
// delivered again (a replay of a captured one) is refused. A message whose
// stamp left the window is refused by its stamp alone, so its MAC is
// forgotten then: the MACs sit in buckets by stamp, each a slice of the
// window, and a bucket goes once its newest stamp has left the window.
//
// Memory is bounded by replayCacheMax. Past it, the bucket of the oldest
// stamps goes first: a replay of one of those messages would then be
// delivered again until its stamp leaves the window, which the handoff
// tolerates (see the package documentation). Refusing genuine messages
// instead would stop the handoff.
type replayCache struct {
	window, width int64 // ms

	mu      sync.Mutex
	buckets map[int64]map[[32]byte]struct{} // by stamp / width
	n       int                             // MACs held
	evicted uint64                          // MACs forgotten early
}

func newReplayCache(window time.Duration) *replayCache {
	w := window.Milliseconds()
	return &replayCache{window: w, width: max(w/replayBuckets, 1), buckets: make(map[int64]map[[32]byte]struct{})}
}

// seen records mac of a message stamped stampMS (Unix ms, within the window
// of nowMS) and reports whether it was recorded already: a replay.
func (c *replayCache) seen(mac string, stampMS, nowMS int64) bool {
	var key [32]byte
	copy(key[:], mac)
	b := stampMS / c.width
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.buckets[b][key]; ok {
		return true
	}
	c.forget(nowMS)
	for c.n >= replayCacheMax {
		c.evictOldest()
	}
	if c.buckets[b] == nil {
		c.buckets[b] = make(map[[32]byte]struct{})
	}
	c.buckets[b][key] = struct{}{}
	c.n++
	return false
}

// forget drops the buckets whose newest stamp is out of the window at
// nowMS: their messages are refused by stamp. c.mu held. There are at most
// 2·replayBuckets+2 buckets, since every stamp recorded was within the
// window either side of the clock.
func (c *replayCache) forget(nowMS int64) {
	for b, macs := range c.buckets {
		if newest := (b+1)*c.width - 1; nowMS-newest > c.window {
			c.n -= len(macs)
			delete(c.buckets, b)
		}
	}
}

// evictOldest drops the bucket of the oldest stamps. c.mu held; c.n > 0.
func (c *replayCache) evictOldest() {
	first := true
	var oldest int64
	for b := range c.buckets {
		if first || b < oldest {
			oldest, first = b, false
		}
	}
	c.n -= len(c.buckets[oldest])
	c.evicted += uint64(len(c.buckets[oldest]))
	delete(c.buckets, oldest)
}

// evictedCount returns how many MACs were forgotten early.
func (c *replayCache) evictedCount() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evicted
}

const (
	// maxStampLead is how far ahead of its clock a bus lets the stamps it
	// signs run, to keep them distinct (see stamper); the clock skew the
	// replay window allows is the window less this.
	maxStampLead = time.Second
	// stampDestinations bounds the destinations a stamper remembers.
	stampDestinations = 4096
)

// stamper hands out the stamps of the messages a bus signs: its clock in
// Unix milliseconds, but strictly increasing per destination, so that two
// messages of the same content sent to one server within a millisecond
// (two replies for one key, two notifications for one inbox) carry
// different MACs, and the receiver's replay cache, which refuses a MAC it
// has seen, delivers both. Stamps run ahead of the clock by at most
// maxStampLead: past it (more than a thousand messages a second to one
// server for a second), a stamp is the clock again, and a message of the
// same content as one sent in that millisecond is refused as a replay.
type stamper struct {
	mu   sync.Mutex
	last map[string]int64 // the last stamp given per destination
}

// next returns the stamp of a message to to at now.
func (s *stamper) next(to string, now time.Time) int64 {
	ms := now.UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = make(map[string]int64)
	}
	if len(s.last) >= stampDestinations {
		// Only a last stamp at or past the clock matters.
		for to, last := range s.last {
			if last < ms {
				delete(s.last, to)
			}
		}
		if len(s.last) >= stampDestinations {
			clear(s.last)
		}
	}
	last, ok := s.last[to]
	if ok && last >= ms && last+1-ms <= maxStampLead.Milliseconds() {
		ms = last + 1
	}
	if !ok || ms > last {
		s.last[to] = ms
	}
	return ms
}
