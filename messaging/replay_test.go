package messaging

import (
	"encoding/binary"
	"testing"
	"time"
)

// macOf is a distinct 32-byte MAC for i.
func macOf(i int) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return string(b[:])
}

// The cache refuses a MAC seen within the window, forgets it once its stamp
// has left the window, and never holds more buckets than the window spans.
func TestReplayCacheForgetsOutsideTheWindow(t *testing.T) {
	const window = 30 * time.Second
	c := newReplayCache(window)
	now := int64(1_700_000_000_000)
	// Stamps spread over the whole window either side of the clock.
	for i := range 1000 {
		stamp := now - window.Milliseconds() + int64(i)*2*window.Milliseconds()/1000
		if c.seen(macOf(i), stamp, now) {
			t.Fatalf("MAC %d seen before it was recorded", i)
		}
		if !c.seen(macOf(i), stamp, now) {
			t.Fatalf("MAC %d not seen the second time", i)
		}
	}
	if got, want := len(c.buckets), 2*replayBuckets+2; got > want {
		t.Errorf("%d buckets, want at most %d", got, want)
	}
	// Two windows later every stamp is out of the window: all are forgotten
	// at the next record.
	later := now + 2*window.Milliseconds() + c.width
	c.seen(macOf(-1), later, later)
	if c.n != 1 || len(c.buckets) != 1 {
		t.Errorf("%d MACs in %d buckets two windows later, want only the new one", c.n, len(c.buckets))
	}
}

// Past its bound the cache forgets its oldest stamps first and keeps the
// newest, so memory stays bounded whatever the traffic.
func TestReplayCacheBounded(t *testing.T) {
	c := newReplayCache(DefaultReplayWindow)
	now := int64(1_700_000_000_000)
	const extra = 5000
	for i := range replayCacheMax + extra {
		// Stamps rise through the window, as the clock of a busy fleet does.
		stamp := now - DefaultReplayWindow.Milliseconds() + int64(i)*DefaultReplayWindow.Milliseconds()/replayCacheMax
		c.seen(macOf(i), stamp, now)
	}
	if c.n > replayCacheMax {
		t.Errorf("%d MACs held, bound %d", c.n, replayCacheMax)
	}
	if c.evictedCount() < extra {
		t.Errorf("%d evicted, want at least %d", c.evictedCount(), extra)
	}
	last := replayCacheMax + extra - 1
	stamp := now - DefaultReplayWindow.Milliseconds() + int64(last)*DefaultReplayWindow.Milliseconds()/replayCacheMax
	if !c.seen(macOf(last), stamp, now) {
		t.Error("the newest MAC was forgotten")
	}
}
