package datadriver_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// blobProfile carries incompressible data.
type blobProfile struct {
	Blob  []byte
	Saves int
}

// Redis memory per record stays a small multiple of its data: the history
// keeps one version an hour, compressed, out of the hot record.
func TestHistoryMemoryPerRecord(t *testing.T) {
	r := testsupport.StartRedis(t)
	if r.Kind == testsupport.KindMiniredis {
		t.Skip("MEMORY USAGE needs a real redis-server")
	}
	s := newServer(t, r, "server-a")
	d := newDriver(t, s, datadriver.Config[blobProfile]{}) // default History and HistoryEvery
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 1024)
	for i := range 25 {
		_, _ = rand.Read(blob)
		_ = p.Update(func(b *blobProfile) { b.Blob, b.Saves = append([]byte(nil), blob...), i })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := r.Client(t)
	rk := datadriver.RecordKey(r.Namespace, "PlayerData", "user:1")
	var total int64
	for _, k := range []string{rk, record.HistoryKey(rk), record.InboxKey(rk)} {
		n, err := c.MemoryUsage(ctx, k, 0).Result() // SAMPLES 0: every field, no estimate
		if err == nil {
			total += n
		}
	}
	data := int64(len(recordFields(t, r, "PlayerData", "user:1")["data"]))
	ratio := float64(total) / float64(data)
	t.Logf("README | Redis memory per record after 25 saves of %d bytes of incompressible data (History 24, HistoryEvery 1 h): %d bytes, %.1f× the data", data, total, ratio)
	if ratio > 4 {
		t.Fatalf("%d bytes of Redis memory for %d bytes of data (%.1f×), want at most 4×", total, data, ratio)
	}
	vs, err := d.Versions(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 {
		t.Fatalf("versions %+v: 25 saves within an hour keep one past version", vs)
	}
}

// ReadVersion reads a kept version without the lock while the player plays.
func TestReadVersionWhileThePlayerPlays(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	const every = 10 * time.Millisecond
	d := players(t, s, func(c *datadriver.Config[player]) { c.HistoryEvery = every })
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins = 1 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(every + 5*time.Millisecond) // the history interval passes
	_ = p.Update(func(d *player) { d.Coins = 2 })
	if err := p.Save(ctx); err != nil { // keeps the version with 1 coin
		t.Fatal(err)
	}
	vs, err := d.Versions(ctx, "user:2")
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
	reader := newServer(t, r, "support-tool")
	rd := players(t, reader)
	old, err := rd.ReadVersion(ctx, "user:2", vs[1].At)
	if err != nil {
		t.Fatalf("ReadVersion: %v", err)
	}
	cur, err := rd.ReadVersion(ctx, "user:2", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("ReadVersion of the current data: %v", err)
	}
	if old.Coins != 1 || cur.Coins != 2 {
		t.Fatalf("ReadVersion: kept %d coins, current %d; want 1 and 2", old.Coins, cur.Coins)
	}
	if err := p.Update(func(d *player) { d.Coins++ }); err != nil {
		t.Fatalf("the player was disturbed by the read: %v", err)
	}
	if _, err := rd.ReadVersion(ctx, "user:2", vs[1].At.Add(-time.Hour)); !errors.Is(err, datadriver.ErrNoVersion) {
		t.Fatalf("ReadVersion before every version = %v, want ErrNoVersion", err)
	}
}

// Records written before the history hash kept versions in ring slots of the
// record itself: they still load, and their versions stay readable.
func TestLegacyRingSlotsStayReadable(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := players(t, s)
	ctx := ctxT(t)
	raw := func(coins int) []byte {
		b, err := msgpack.Marshal(player{Coins: coins})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now().UnixMilli()
	rk := datadriver.RecordKey(r.Namespace, "PlayerData", "user:3")
	v1, t1, d1 := record.SlotFields(1)
	v2, t2, d2 := record.SlotFields(2)
	if err := r.Client(t).HSet(ctx, rk, "data", raw(3), "ver", 3, "at", now, "epoch", 3, "fmt", 1,
		v1, 1, t1, now-2000, d1, raw(1), v2, 2, t2, now-1000, d2, raw(2)).Err(); err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions(ctx, "user:3")
	if err != nil || len(vs) != 3 || vs[2].Ver != 1 {
		t.Fatalf("versions of a legacy record: %+v, %v", vs, err)
	}
	got, err := d.ReadVersion(ctx, "user:3", time.UnixMilli(now-1500))
	if err != nil || got.Coins != 1 {
		t.Fatalf("ReadVersion of a ring slot = %+v, %v; want 1 coin", got, err)
	}
	p, err := d.RestoreAt(ctx, "user:3", time.UnixMilli(now-1000), datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt a ring slot: %v", err)
	}
	if coins(p) != 2 {
		t.Fatalf("restored %d coins, want 2", coins(p))
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err = d.Versions(ctx, "user:3")
	if err != nil || len(vs) != 4 || vs[1].Ver != 3 {
		t.Fatalf("after the restore: %+v, %v; want the restore (ver 4), the data it replaced (ver 3) and the slots", vs, err)
	}
}

// Over hours of play, one version is kept per HistoryEvery (virtual time).
func TestHistoryKeepsOneVersionAnHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testsupport.NewCluster(t)
		a := c.Start(nil)
		d := refDriver(t, a, func(cfg *datadriver.Config[player]) { cfg.History = 3 })
		ctx := context.Background()
		p, err := d.Join(ctx, "user:4")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 * 12 { // 5 hours, a change every 5 minutes, saved by autosave
			_ = p.Update(func(d *player) { d.Coins = i })
			time.Sleep(5 * time.Minute)
		}
		vs, err := d.Versions(ctx, "user:4")
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 4 {
			t.Fatalf("%d versions after 5 h, want the current one and 3 kept (History 3)", len(vs))
		}
		for i := 2; i < len(vs); i++ {
			if gap := vs[i-1].At.Sub(vs[i].At); gap < time.Hour {
				t.Errorf("versions %d and %d are %s apart, want at least HistoryEvery (1 h)", vs[i].Ver, vs[i-1].Ver, gap)
			}
		}
	})
}
