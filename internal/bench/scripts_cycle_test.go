package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// sysScripts is BenchmarkCycle's fifth system: the library's own three
// scripts and nothing of the library around them.
const sysScripts = "scripts"

// scriptsCycle is the session cycle as the library's own scripts make it,
// called straight through go-redis with nothing of the library around
// them: acquire.lua (a fresh token each session), then save.lua to save
// and to release, each write the data msgpack-encoded afresh with its
// record checksum, as the protocol requires. What the library costs beyond
// its protocol is ours ÷ this; what the protocol costs beyond the least a
// fenced-script lock does is this ÷ floor.
func scriptsCycle(rdb *redis.Client, ns string, blob []byte) func(ctx context.Context, w, i int) error {
	return func(ctx context.Context, w, i int) error {
		key := record.Key(ns, driverName, playerKey(w))
		token := strconv.Itoa(w) + "-" + strconv.Itoa(i)
		res, err := record.Acquire(ctx, rdb, key, record.AcquireArgs{Job: "scripts", Token: token, Presence: true,
			MaxAge: 32 * time.Second, Skew: 2 * time.Second, Format: record.Format})
		if err != nil || res.Outcome != record.Acquired {
			return fmt.Errorf("acquire %s: %v (outcome %v)", key, err, res.Outcome)
		}
		var d profileData
		if len(res.Data) > 0 {
			if err := msgpack.Unmarshal(res.Data, &d); err != nil {
				return err
			}
		} else {
			d.Blob = blob
		}
		for _, mode := range []record.WriteMode{record.ModeSave, record.ModeRelease} {
			d.Coins++
			data, err := msgpack.Marshal(&d)
			if err != nil {
				return err
			}
			r, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: mode, Token: token, Data: data,
				Sum: record.RecordSum(data, 0, 0, nil, nil)})
			if err != nil || r.Outcome != record.Written {
				return fmt.Errorf("%s %s: %v (outcome %v)", mode, key, err, r.Outcome)
			}
		}
		return nil
	}
}

// The scripts system does a whole session each cycle: after 5 cycles of 2
// players each record holds 10 coins more, unlocked.
func TestScriptsCycleWritesEverySession(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	cycle := scriptsCycle(rdb, r.Namespace, newBlob(512, rand.NewChaCha8([32]byte{1})))
	for i := range 5 {
		for w := range 2 {
			if err := cycle(ctx, w, i); err != nil {
				t.Fatalf("cycle %d of player %d: %v", i, w, err)
			}
		}
	}
	for w := range 2 {
		f, err := rdb.HGetAll(ctx, record.Key(r.Namespace, driverName, playerKey(w))).Result()
		if err != nil {
			t.Fatal(err)
		}
		var d profileData
		if err := msgpack.Unmarshal([]byte(f[record.FieldData]), &d); err != nil {
			t.Fatal(err)
		}
		if d.Coins != 10 || len(d.Blob) == 0 || f[record.FieldLockToken] != "" {
			t.Fatalf("player %d: %d coins, %d bytes of blob, lock token %q; want 10, the blob, no lock",
				w, d.Coins, len(d.Blob), f[record.FieldLockToken])
		}
	}
}
