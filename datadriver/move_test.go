package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// movePair is two servers with the player driver each, and a counter of
// the target's Redis round trips.
type movePair struct {
	*pair
	da, db *datadriver.Driver[player]
	count  *testsupport.CommandCounter
}

func newMovePair(t *testing.T, opts ...func(*datadriver.Config[player])) *movePair {
	t.Helper()
	pr := newPair(t)
	mp := &movePair{pair: pr, da: players(t, pr.a, opts...), db: players(t, pr.b, opts...),
		count: &testsupport.CommandCounter{}}
	pr.b.rdb.AddHook(mp.count)
	return mp
}

// joinWith joins key on d with coins set.
func joinWith(t *testing.T, d *datadriver.Driver[player], key string, c int) *datadriver.Profile[player] {
	t.Helper()
	p, err := d.Join(ctxT(t), key)
	if err != nil {
		t.Fatalf("join %s: %v", key, err)
	}
	if err := p.Update(func(d *player) { d.Coins = c }); err != nil {
		t.Fatalf("update: %v", err)
	}
	return p
}

func TestMoveToHandsTheSessionOver(t *testing.T) {
	mp := newMovePair(t)
	const key = "user:move"
	p := joinWith(t, mp.da, key, 777)
	epoch := p.Epoch()
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("the source session is still live after MoveTo answered nil")
	}
	var moved *datadriver.MovedError
	if err := p.Err(); !errors.Is(err, datadriver.ErrMoved) || !errors.As(err, &moved) || moved.To != "server-b" {
		t.Fatalf("source Err = %v, want a *MovedError to server-b", err)
	}
	if err := p.Update(func(d *player) { d.Coins++ }); !errors.Is(err, datadriver.ErrMoved) {
		t.Fatalf("Update after the move = %v, want ErrMoved", err)
	}
	f := recordFields(t, mp.r, "PlayerData", key)
	if f["lock.job"] != "server-b" || f[record.FieldMoveState] != record.MoveCommitted || f[record.FieldMoveFrom] != "server-a" ||
		f[record.FieldMoveTo] != "server-b" || f[record.FieldMoveID] != moved.ID {
		t.Fatalf("record after the move: %v", f)
	}
	// The target has the profile once the commit arrives; its Join costs
	// no Redis command.
	eventually(t, 5*time.Second, "the target installs the moved profile", func() bool {
		return strings.Contains(mp.pair.b.logs.String(), "profile moved here")
	})
	mp.count.Reset()
	q, err := mp.db.Join(ctxT(t), key)
	if err != nil {
		t.Fatalf("target join: %v", err)
	}
	if n := mp.count.RoundTrips(); n != 0 {
		t.Fatalf("the target's Join of a moved profile made %d Redis round trips (%v), want 0", n, mp.count.Commands())
	}
	if c := coins(q); c != 777 {
		t.Fatalf("target coins = %d, want 777", c)
	}
	if q.Epoch() != epoch+1 {
		t.Fatalf("target epoch = %d, want %d", q.Epoch(), epoch+1)
	}
	// The target's session is a session like any: it saves and releases.
	if err := q.Update(func(d *player) { d.Coins++ }); err != nil {
		t.Fatalf("target update: %v", err)
	}
	if err := q.Release(ctxT(t)); err != nil {
		t.Fatalf("target release: %v", err)
	}
	if got := clusterFree(t, mp.r, key); got != 778 {
		t.Fatalf("stored coins after the target's release = %d, want 778", got)
	}
}

// clusterFree reads key's stored coins, checking that its lock is free.
func clusterFree(t *testing.T, r *testsupport.Redis, key string) int {
	t.Helper()
	f := recordFields(t, r, "PlayerData", key)
	if f["lock.token"] != "" {
		t.Fatalf("lock still held: %v", f)
	}
	var pl player
	if err := msgpackUnmarshal([]byte(f["data"]), &pl); err != nil {
		t.Fatalf("decode stored data: %v", err)
	}
	return pl.Coins
}

var _ = context.Background
