package testsupport

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RDBSnapshot is an RDB file of a Redis's data at one moment, kept aside
// by [Redis.Snapshot].
type RDBSnapshot struct {
	path string
}

// Snapshot has the server write its whole data to an RDB file now (SAVE)
// and keeps a copy aside: [Redis.RestartFrom] later brings it back, as a
// Redis restarted from its last RDB snapshot does, with everything written
// since lost (beats, saves, locks). Only for a spawned redis-server without
// AOF (an AOF would be loaded instead); other kinds skip the test.
func (r *Redis) Snapshot(tb testing.TB) RDBSnapshot {
	tb.Helper()
	if r.Kind != KindRedisServer || r.aof {
		tb.Skipf("testsupport: Snapshot needs a spawned redis-server without AOF, not %s", r.Kind)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		tb.Fatalf("testsupport: SAVE on %s: %v", r.Addr, err)
	}
	r.snapshots++
	s := RDBSnapshot{path: filepath.Join(r.dir, "snapshot-"+strconv.Itoa(r.snapshots)+".rdb")}
	if err := os.Rename(filepath.Join(r.dir, "dump.rdb"), s.path); err != nil {
		tb.Fatalf("testsupport: keep the snapshot of %s: %v", r.Addr, err)
	}
	return s
}

// RestartFrom crashes the server (kill -9) and starts a new one on the
// same address that loads snapshot s: a new run_id, an empty script cache,
// and the data as it was when s was taken. A later crash restart starts
// empty again.
func (r *Redis) RestartFrom(tb testing.TB, s RDBSnapshot) {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.kill()
		r.proc = nil
	}
	b, err := os.ReadFile(s.path)
	if err == nil {
		err = os.WriteFile(filepath.Join(r.dir, "dump.rdb"), b, 0o644)
	}
	if err != nil {
		tb.Fatalf("testsupport: put snapshot %s back: %v", s.path, err)
	}
	r.respawn(tb)
	_ = os.Remove(filepath.Join(r.dir, "dump.rdb"))
}
