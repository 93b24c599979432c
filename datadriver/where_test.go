package datadriver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/presence"
)

// TestWhereHeld: a key held by server A reads, from B, as held by A since
// its join (Redis clock), with the presence flag, alive; from A as local;
// after the release as held by nobody; B's join then stamps a later since.
func TestWhereHeld(t *testing.T) {
	pr := newPair(t, fast)
	ctx := ctxT(t)
	a, b := players(t, pr.a), players(t, pr.b)
	if h, err := b.Where(ctx, "user:1"); err != nil || h.Held() || h.Epoch != 0 {
		t.Fatalf("Where of a key never joined = %+v, %v; want held by nobody, epoch 0", h, err)
	}
	before := time.Now()
	p, err := a.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	_ = p.Update(func(d *player) { d.Coins++ })
	if err := p.Save(ctx); err != nil { // a save does not move since
		t.Fatal(err)
	}
	h, err := b.Where(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	// The Redis server runs on this machine: its clock is ours.
	if h.JobID != "server-a" || !h.Presence || h.Status != presence.Alive || h.Local || h.Epoch != p.Epoch() ||
		h.Since.Before(before.Add(-time.Second)) || h.Since.After(after.Add(time.Second)) {
		t.Fatalf("Where from B = %+v; want server-a, presence flag, alive, epoch %d, since the join (%s..%s)", h,
			p.Epoch(), before.Format(time.StampMilli), after.Format(time.StampMilli))
	}
	if own, err := a.Where(ctx, "user:1"); err != nil || !own.Local || own.Status != presence.Alive || own.Since != h.Since {
		t.Fatalf("Where from A = %+v, %v; want local, alive, the same since", own, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Where(ctx, "user:1"); err != nil || h.Held() || !h.Since.IsZero() {
		t.Fatalf("Where after the release = %+v, %v; want held by nobody", h, err)
	}
	time.Sleep(5 * time.Millisecond) // the next since is a later millisecond
	q, err := b.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if h2, err := a.Where(ctx, "user:1"); err != nil || h2.JobID != "server-b" || !h2.Since.After(h.Since) {
		t.Fatalf("Where after B's join = %+v, %v; want server-b since after %s", h2, err, h.Since)
	}
	_ = q.Release(ctx)
}

// TestWhereStopped: a holder that crashed (its beats stopped) reads as
// stopped once a whole PresenceTTL passed without a beat, and the next join
// takes the lock over.
func TestWhereStopped(t *testing.T) {
	pr := newPair(t, fast)
	ctx := ctxT(t)
	a, b := players(t, pr.a), players(t, pr.b)
	if _, err := a.Join(ctx, "user:2"); err != nil {
		t.Fatal(err)
	}
	crash(t, pr.a)
	eventually(t, 10*fastTTL, "the crashed holder reads as stopped", func() bool {
		h, err := b.Where(ctx, "user:2")
		if err != nil || h.JobID != "server-a" {
			t.Fatalf("Where after the crash = %+v, %v; want still held by server-a", h, err)
		}
		return h.Status == presence.Stopped
	})
	q, err := b.Join(ctx, "user:2")
	if err != nil {
		t.Fatalf("join after Where said stopped: %v", err)
	}
	if h, _ := b.Where(ctx, "user:2"); h.JobID != "server-b" || !h.Local {
		t.Fatalf("Where after the takeover = %+v; want held here", h)
	}
	_ = q.Release(ctx)
}

// TestWhereSinceUnknown: a lock taken by a build that did not stamp
// lock.since (its epoch disagrees, or the field is absent) reads with a
// zero Since, the rest as usual; a lock without a holder is corrupt.
func TestWhereSinceUnknown(t *testing.T) {
	pr := newPair(t, fast)
	ctx := ctxT(t)
	a, b := players(t, pr.a), players(t, pr.b)
	p, err := a.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:3")
	c := pr.r.Client(t)
	for _, since := range []string{"99,1700000000000", ""} {
		if since == "" {
			err = c.HDel(ctx, rk, "lock.since").Err()
		} else {
			err = c.HSet(ctx, rk, "lock.since", since).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := b.Where(ctx, "user:3")
		if err != nil || h.JobID != "server-a" || !h.Since.IsZero() || h.Status != presence.Alive {
			t.Fatalf("Where with lock.since %q = %+v, %v; want server-a, alive, since unknown", since, h, err)
		}
	}
	if err := c.HSet(ctx, rk, "lock.job", "").Err(); err != nil {
		t.Fatal(err)
	}
	var ce *datadriver.CorruptRecordError
	if _, err := b.Where(ctx, "user:3"); !errors.As(err, &ce) || ce.Path != "lock.job" {
		t.Fatalf("Where of a lock without a holder: %v; want a *CorruptRecordError naming lock.job", err)
	}
	_ = p
}
