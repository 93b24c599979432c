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
	c := newReplayCache(defaultReplayWindow)
	now := int64(1_700_000_000_000)
	const extra = 5000
	for i := range replayCacheMax + extra {
		// Stamps rise through the window, as the clock of a busy fleet does.
		stamp := now - defaultReplayWindow.Milliseconds() + int64(i)*defaultReplayWindow.Milliseconds()/replayCacheMax
		c.seen(macOf(i), stamp, now)
	}
	if c.n > replayCacheMax {
		t.Errorf("%d MACs held, bound %d", c.n, replayCacheMax)
	}
	if c.evictedCount() < extra {
		t.Errorf("%d evicted, want at least %d", c.evictedCount(), extra)
	}
	last := replayCacheMax + extra - 1
	stamp := now - defaultReplayWindow.Milliseconds() + int64(last)*defaultReplayWindow.Milliseconds()/replayCacheMax
	if !c.seen(macOf(last), stamp, now) {
		t.Error("the newest MAC was forgotten")
	}
}

// Stamps of one bus rise by a millisecond per message to one destination
// within a millisecond of its clock, each destination on its own, and run
// at most maxStampLead ahead of the clock.
func TestStamperDistinctStamps(t *testing.T) {
	var s stamper
	now := time.UnixMilli(1_700_000_000_000)
	ms := now.UnixMilli()
	for i := range 5 {
		if got := s.next("server-a", now); got != ms+int64(i) {
			t.Fatalf("stamp %d to server-a = %d, want %d", i, got, ms+int64(i))
		}
	}
	if got := s.next("server-b", now); got != ms {
		t.Fatalf("first stamp to server-b = %d, want the clock %d", got, ms)
	}
	if got := s.next("server-a", now.Add(time.Second)); got != ms+1000 {
		t.Fatalf("stamp a second later = %d, want the clock %d", got, ms+1000)
	}
	lead := maxStampLead.Milliseconds()
	var last int64
	for range 3 * lead {
		last = s.next("server-c", now)
		if last-ms > lead {
			t.Fatalf("stamp %d runs %d ms ahead of the clock, want at most %d", last, last-ms, lead)
		}
	}
	if last != ms {
		t.Fatalf("past the lead the stamp is %d, want the clock %d", last, ms)
	}
}

// Two messages of the same content sent to one server in the same
// millisecond (two replies for one key, two notifications of one inbox)
// are two messages: the receiver's replay cache delivers both.
func TestSameContentWithinAMillisecondDelivered(t *testing.T) {
	w := newAuthWorld(t)
	busA := newBus(t, w.ncA, withKey(testKey), withClock(w.clk))
	busB := newBus(t, w.ncB, withKey(testKey), withClock(w.clk))
	ch, _ := subscribe(t, busA, w.ncA, "server-a")
	reply := Message{Type: TypeReply, Driver: "PlayerData", Key: "user:42", Sender: "server-b"}
	for range 3 {
		if err := busB.Publish(t.Context(), "server-a", reply); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if got := receive(t, ch); got.Key != reply.Key {
			t.Fatalf("message %d: %+v", i, got)
		}
	}
	if st := busA.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v, want nothing dropped", st)
	}
}
