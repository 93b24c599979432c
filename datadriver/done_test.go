package datadriver_test

import (
	"testing"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// TestDoneIsMadeWhenFirstAskedFor: a resident profile nobody watches has
// no Done channel (96 bytes of each); asked for before the end, it closes
// at the end; asked for after, it is closed already, every time.
func TestDoneIsMadeWhenFirstAskedFor(t *testing.T) {
	r := testsupport.StartRedis(t)
	d := players(t, newServer(t, r, "server-a"))
	ctx := ctxT(t)

	watched, err := d.Join(ctx, "user:watched")
	if err != nil {
		t.Fatal(err)
	}
	if datadriver.HasDoneChannel(watched) {
		t.Fatal("a profile nobody asked Done of has its channel")
	}
	done := watched.Done()
	if done != watched.Done() {
		t.Fatal("Done answered two channels")
	}
	select {
	case <-done:
		t.Fatal("Done is closed while the profile is live")
	default:
	}
	if err := watched.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the Done asked for before the release is not closed after it")
	}

	unwatched, err := d.Join(ctx, "user:unwatched")
	if err != nil {
		t.Fatal(err)
	}
	if err := unwatched.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-unwatched.Done():
		default:
			t.Fatal("Done asked for after the release is not closed")
		}
	}
}
