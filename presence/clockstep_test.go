package presence

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

// A beat stamped further ahead than one TTL (written before the Redis
// clock stepped back) holds a takeover off for at most one TTL of the
// reader's clock: Alive with at most TTL left, then Stopped once the field
// still holds that very value a TTL later. A beat that lands meanwhile
// makes it an ordinary live beat again.
func TestBeatAheadOfTheClockCountsAsOneTTL(t *testing.T) {
	r := startRedis(t)
	rdb := r.client(t)
	key := testKey(t)
	mock := clock.NewMock()
	mock.Set(time.Now())
	reader := server(t, rdb, key, "reader", Config{Clock: mock})
	mustBeat(t, reader) // the run meta, as a live deployment has it
	ttl := reader.cfg.TTL
	s := reader.shardOf("b")
	ahead := func(d time.Duration) {
		t.Helper()
		v := strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10)
		if err := rdb.HSet(context.Background(), s.key, "b", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ahead(5 * time.Minute) // b's last beat, before the Redis clock stepped back 5 min
	// The meta must be one TTL old for a stopped answer: age it.
	if err := rdb.HSet(context.Background(), s.key, "\x00since", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if got := reader.Read(context.Background(), "b"); got.Status != Alive || got.ExpiresIn != ttl {
		t.Fatalf("first read = %+v, want Alive with one TTL (%v) left", got, ttl)
	}
	mock.Add(ttl - time.Second)
	if got := reader.Read(context.Background(), "b"); got.Status != Alive || got.ExpiresIn != time.Second {
		t.Fatalf("read after TTL-1s = %+v, want Alive with 1s left", got)
	}
	mock.Add(time.Second)
	if got := reader.Read(context.Background(), "b"); got.Status != Stopped {
		t.Fatalf("read a TTL after the field was first seen unchanged = %+v, want Stopped", got)
	}
	ahead(6 * time.Minute) // b beats again (still ahead): a new value starts the count over
	if got := reader.Read(context.Background(), "b"); got.Status != Alive || got.ExpiresIn != ttl {
		t.Fatalf("read after a new beat = %+v, want Alive with one TTL left", got)
	}
	ahead(5 * time.Second) // a beat within one TTL: an ordinary live beat
	if got := reader.Read(context.Background(), "b"); got.Status != Alive || got.ExpiresIn > 5*time.Second {
		t.Fatalf("read of an ordinary beat = %+v", got)
	}
}
