package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// A record another tool broke is refused by a join, naming the field and
// this command; repair puts it right (a broken lock only with --force), a
// dry run changes nothing, and the record then loads.
func testRepairMakesABrokenRecordLoad(t *testing.T, e testEnv) {
	s := e.startServer(t, "server-a", serverOpts{})
	ctx := context.Background()
	rk := e.rk("PlayerData", "user:9")
	ahead := strconv.FormatInt(time.Now().Add(48*time.Hour).UnixMilli(), 10)
	e.putRecord(t, rk, "ver", "not-a-number", "epoch", "12", "lock.token", "t", "lock.job", "a-tool", "lock.at", ahead)
	_, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{})
	var ce *datadriver.CorruptRecordError
	if !errors.As(err, &ce) || ce.Path != "ver" || !strings.Contains(err.Error(), "playerdata repair") {
		t.Fatalf("Load = %v, want ErrCorruptRecord naming ver and the repair command", err)
	}

	dry := runArgs(t, 10*time.Second, e.args("repair", "--driver", "PlayerData", "--dry-run", "user:9")...)
	if !strings.Contains(dry.stdout, "would change") || e.rdb.HGet(ctx, rk, "ver").Val() != "not-a-number" {
		t.Fatalf("dry run: %v\n%s\nver %q", dry.err, dry.stdout, e.rdb.HGet(ctx, rk, "ver").Val())
	}
	// Without --force the lock (another tool's, stamped two days ahead) is left.
	r := runArgs(t, 10*time.Second, e.args("repair", "--driver", "PlayerData", "user:9")...)
	if r.err == nil || !strings.Contains(r.stdout, "lock.at") || !strings.Contains(r.stdout, "--force") {
		t.Fatalf("repair without --force: %v\n%s", r.err, r.stdout)
	}
	if v := e.rdb.HGet(ctx, rk, "ver").Val(); v != "1" {
		t.Errorf("ver %q after the repair, want 1", v)
	}
	if _, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{}); !errors.As(err, &ce) || ce.Path != "lock.at" {
		t.Fatalf("Load after the first repair = %v, want ErrCorruptRecord naming lock.at", err)
	}
	if r := runArgs(t, 10*time.Second, e.args("repair", "--driver", "PlayerData", "--force", "user:9")...); r.err != nil {
		t.Fatalf("repair --force: %v\n%s", r.err, r.stdout)
	}
	p, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("Load after the repair: %v", err)
	}
	if p.Epoch() != 13 {
		t.Errorf("epoch %d after the repair, want 13: the fencing token never goes back", p.Epoch())
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
