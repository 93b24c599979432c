package presencecore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ckernel/playerdata/internal/mockclock"
	"github.com/redis/go-redis/v9"
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
	mock := mockclock.New()
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

// A forward step of the Redis clock makes every beat of the shard look
// expired at once. A reader that has seen that shard's clock before (its own
// beats) sees the jump and reads a missing beat Unknown for one TTL of its
// own clock, the time every live server has to beat under the new clock;
// a server that beat meanwhile reads Alive, one that did not reads Stopped
// once the TTL is over. Without a step, an expired beat reads Stopped at
// once. Both clocks are virtual: miniredis's TIME and a mock.
func TestForwardStepOfTheRedisClockReadsUnknownForOneTTL(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	start := time.Now().Truncate(time.Millisecond)
	redisAt := start
	mr.SetTime(redisAt)
	mock := mockclock.New()
	mock.Set(start)
	logs := &logBuffer{}
	reader := newTestPresence(t, rdb, Config{Key: testKey(t), JobID: "reader", Clock: mock, Logger: logs.logger()})
	ttl := reader.cfg.TTL
	// advance moves both clocks by d, the Redis one by step more.
	advance := func(d, step time.Duration) {
		mock.Add(d)
		redisAt = redisAt.Add(d + step)
		mr.SetTime(redisAt)
	}
	beatB := func() { // server b beats into the reader's shard, under the Redis clock
		t.Helper()
		v := strconv.FormatInt(redisAt.Add(ttl).UnixMilli(), 10)
		if err := rdb.HSet(context.Background(), reader.shardOf("b").key, "b", v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(job string) Reading { return reader.Read(context.Background(), job) }

	mustBeat(t, reader)
	advance(ttl+time.Second, 0) // the run meta is one TTL old: a missing beat can read Stopped
	mustBeat(t, reader)
	if got := read("gone"); got.Status != Stopped {
		t.Fatalf("a server that never beat, clocks in step = %+v, want Stopped", got)
	}
	beatB()
	mustBeat(t, reader)
	advance(time.Second, 5*time.Minute)
	got := read("b")
	if got.Status != Unknown || got.ExpiresIn != ttl || got.Err != nil {
		t.Fatalf("b's live beat right after a +5 min step = %+v, want Unknown for one TTL (%v)", got, ttl)
	}
	if !strings.Contains(logs.String(), "jumped ahead by about 5m0s") {
		t.Errorf("the step is not logged:\n%s", logs)
	}
	advance(ttl/2, 0)
	if got := read("b"); got.Status != Unknown || got.ExpiresIn != ttl/2 {
		t.Fatalf("half a TTL after the step = %+v, want Unknown with %v left", got, ttl/2)
	}
	beatB() // b beats under the stepped clock: an ordinary live beat
	if got := read("b"); got.Status != Alive {
		t.Fatalf("after b beat again = %+v, want Alive", got)
	}
	if got := read("gone"); got.Status != Unknown {
		t.Fatalf("a server that never beat, within the TTL after the step = %+v, want Unknown", got)
	}
	mustBeat(t, reader)
	advance(ttl/2, 0)
	if got := read("gone"); got.Status != Stopped {
		t.Fatalf("a server that never beat, a TTL after the step = %+v, want Stopped", got)
	}
}
