package presence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/presence"
)

func TestStatusNames(t *testing.T) {
	for s, want := range map[presence.Status]string{presence.Unknown: "unknown", presence.Alive: "alive", presence.Stopped: "stopped"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(s), s.String(), want)
		}
	}
}

// TestClaimAndConfig: a bad Config is refused with ErrInvalidConfig, a
// second process beating a live JobID gets ErrJobIDInUse, and a beat after
// Close gets ErrClosed.
func TestClaimAndConfig(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if _, err := presence.New(rdb, presence.Config{JobID: "bad.job"}); !errors.Is(err, presence.ErrInvalidConfig) {
		t.Fatalf("New with JobID bad.job = %v, want ErrInvalidConfig", err)
	}
	open := func() *presence.Presence {
		p, err := presence.New(rdb, presence.Config{Namespace: "mygame", JobID: "server-a"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(ctx) })
		return p
	}
	a := open()
	if err := a.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if !mr.Exists("mygame:CKPresence") {
		t.Fatalf("no beat under mygame:CKPresence; keys %v", mr.Keys())
	}
	if err := open().Beat(ctx); !errors.Is(err, presence.ErrJobIDInUse) {
		t.Fatalf("a second process's beat of a live JobID = %v, want ErrJobIDInUse", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Beat(ctx); !errors.Is(err, presence.ErrClosed) {
		t.Fatalf("Beat after Close = %v, want ErrClosed", err)
	}
}
