package presencecore

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// A Stopped reading says when the server last beat: its expiry minus the
// TTL, on the Redis clock, so a log can say how long it has been silent.
func TestReadStoppedSaysWhenItLastBeat(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rdb := r.client(t)
	key := testKey(t)
	timing := Config{Beat: 300 * time.Millisecond, TTL: time.Second}
	a := server(t, rdb, key, "a", timing)
	mustBeat(t, a)
	agePresenceRun(t, rdb, key)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// "dead" beat its last 11 s ago: its beat expired 10 s ago.
	expiry := now.Add(-11*time.Second + timing.TTL).UnixMilli()
	if err := rdb.HSet(ctx, key, "dead", strconv.FormatInt(expiry, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	got := a.Read(ctx, "dead")
	if got.Status != Stopped {
		t.Fatalf("Read(dead) = %+v, want stopped", got)
	}
	if silent := got.At.Sub(got.LastBeat); silent < 11*time.Second || silent > 11*time.Second+time.Second {
		t.Errorf("Read(dead): At - LastBeat = %v (LastBeat %v, At %v), want about 11 s", silent, got.LastBeat, got.At)
	}

	// No beat of it left in the hash: not known.
	if got := a.Read(ctx, "never-beat"); got.Status != Stopped || !got.LastBeat.IsZero() {
		t.Errorf("Read(never-beat) = %+v, want stopped with a zero LastBeat", got)
	}
}
