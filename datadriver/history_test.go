package datadriver_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
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
	rk := record.Key(r.Namespace, "PlayerData", "user:1")
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

// Versions stored whole with text metadata (d<ver> and t<ver>, as builds
// before deltas wrote them) list, read and restore; the restore's own write
// keeps the data it replaces and rewrites the newest of them as a delta.
func TestWholeTextVersionsStayReadable(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := players(t, s)
	ctx := ctxT(t)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	raw := func(coins int) []byte {
		b, err := msgpack.Marshal(player{Coins: coins, Items: map[string]int{"sword": 1, "shield": coins}, Name: "hero"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now().UnixMilli()
	rk := record.Key(r.Namespace, "PlayerData", "user:3")
	c := r.Client(t)
	if err := c.HSet(ctx, rk, "data", raw(3), "ver", 3, "at", now, "epoch", 3, "fmt", 1, "hist.at", now-1000).Err(); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 2; v++ {
		if err := c.HSet(ctx, record.HistoryKey(rk), record.HistDataField(v), record.AppendWholeText(nil, enc, raw(int(v))),
			record.HistMetaField(v), fmt.Sprintf("%d,0,0", now-3000+1000*v)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := d.Versions(ctx, "user:3")
	if err != nil || len(vs) != 3 || vs[2].Ver != 1 || vs[2].At.UnixMilli() != now-2000 {
		t.Fatalf("versions of a whole-copy history: %+v, %v", vs, err)
	}
	got, err := d.ReadVersion(ctx, "user:3", time.UnixMilli(now-1500))
	if err != nil || got.Coins != 1 || got.Items["shield"] != 1 {
		t.Fatalf("ReadVersion of a whole copy = %+v, %v; want 1 coin", got, err)
	}
	p, err := d.RestoreAt(ctx, "user:3", time.UnixMilli(now-1000), datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt a whole copy: %v", err)
	}
	if coins(p) != 2 {
		t.Fatalf("restored %d coins, want 2", coins(p))
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err = d.Versions(ctx, "user:3")
	if err != nil || len(vs) != 4 || vs[1].Ver != 3 {
		t.Fatalf("after the restore: %+v, %v; want the restore (ver 4), the data it replaced (ver 3), 2 and 1", vs, err)
	}
	h := listHistory(t, c, rk)
	var f []record.Form
	for _, v := range h.Versions {
		f = append(f, v.Form)
	}
	if !slices.Equal(f, []record.Form{record.FormWholeText, record.FormDelta, record.FormWhole}) {
		t.Fatalf("forms %v, want 1 as it was, 2 rewritten as a delta against 3, 3 whole", f)
	}
	for i, want := range []int{3, 2, 1} {
		got, err := d.ReadVersion(ctx, "user:3", vs[i+1].At)
		if err != nil || got.Coins != want {
			t.Fatalf("ReadVersion of ver %d = %+v, %v; want %d coins", vs[i+1].Ver, got, err, want)
		}
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

// fillHistory saves key n times, a millisecond apart with HistoryEvery 1 ms
// (so each save keeps the data it replaces), each save changing a few of
// the profile's values, and returns the coins each ver was saved with.
func fillHistory(t *testing.T, d *datadriver.Driver[player], key string, n int) map[int64]int {
	t.Helper()
	ctx := ctxT(t)
	p, err := d.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	saved := map[int64]int{}
	for i := 1; i <= n; i++ {
		_ = p.Update(func(d *player) {
			d.Coins, d.Name = 1000+i, "hero"
			if d.Items == nil {
				d.Items = map[string]int{}
			}
			for k := range 40 {
				if _, ok := d.Items[fmt.Sprintf("item-%02d", k)]; !ok {
					d.Items[fmt.Sprintf("item-%02d", k)] = k * 7
				}
			}
			d.Items[fmt.Sprintf("item-%02d", i%40)] += i
		})
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		vs, err := d.Versions(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		saved[vs[0].Ver] = 1000 + i
		time.Sleep(2 * time.Millisecond)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return saved
}

// A full history of deltas: the newest kept version is whole, the others
// deltas, and ReadVersion and RestoreAt read each one as it was saved.
func TestEveryDeltaVersionReads(t *testing.T) {
	r := testsupport.StartRedis(t)
	d := players(t, newServer(t, r, "server-a"), func(c *datadriver.Config[player]) { c.HistoryEvery = time.Millisecond })
	ctx := ctxT(t)
	saved := fillHistory(t, d, "user:5", defaults.History+3)
	vs, err := d.Versions(ctx, "user:5")
	if err != nil || len(vs) != defaults.History+1 {
		t.Fatalf("versions %+v, %v; want the current one and %d kept", vs, err, defaults.History)
	}
	h := listHistory(t, r.Client(t), record.Key(r.Namespace, "PlayerData", "user:5"))
	for i, s := range h.Versions {
		if want := i == len(h.Versions)-1; (s.Form == record.FormWhole) != want {
			t.Errorf("version %d is stored %s (%d bytes)", s.Ver, s.Form, s.Bytes)
		}
	}
	for _, v := range vs {
		got, err := d.ReadVersion(ctx, "user:5", v.At)
		if err != nil || got.Coins != saved[v.Ver] || len(got.Items) < 40 {
			t.Fatalf("ReadVersion of ver %d = %d coins, %d items, %v; want %d coins", v.Ver, got.Coins, len(got.Items), err, saved[v.Ver])
		}
	}
	oldest := vs[len(vs)-1]
	p, err := d.RestoreAt(ctx, "user:5", oldest.At, datadriver.LoadOptions{})
	if err != nil || coins(p) != saved[oldest.Ver] {
		t.Fatalf("RestoreAt the oldest: %v; want %d coins", err, saved[oldest.Ver])
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A damaged kept version costs itself and the older versions whose deltas
// need it, down to the next whole one: those answer ErrCorruptRecord (a
// restore of one changes nothing), every other version reads.
func TestADamagedVersionCostsItsChain(t *testing.T) {
	r := testsupport.StartRedis(t)
	d := players(t, newServer(t, r, "server-a"), func(c *datadriver.Config[player]) { c.HistoryEvery = time.Millisecond })
	ctx := ctxT(t)
	saved := fillHistory(t, d, "user:6", 10)
	vs, err := d.Versions(ctx, "user:6") // current 10, kept 9..1
	if err != nil || len(vs) != 10 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
	c := r.Client(t)
	hk := record.HistoryKey(record.Key(r.Namespace, "PlayerData", "user:6"))
	const damaged = 6
	field := fmt.Sprintf("k%d", damaged)
	b, err := c.HGet(ctx, hk, field).Bytes()
	if err != nil {
		t.Fatalf("%s: %v", field, err)
	}
	b[len(b)/2] ^= 0x5a
	c.HSet(ctx, hk, field, b)
	before := recordFields(t, r, "PlayerData", "user:6")
	for _, v := range vs {
		got, err := d.ReadVersion(ctx, "user:6", v.At)
		switch {
		case v.Ver <= damaged:
			if !errors.Is(err, datadriver.ErrCorruptRecord) {
				t.Errorf("ReadVersion of ver %d = %v, want ErrCorruptRecord (its chain needs ver %d)", v.Ver, err, damaged)
			}
		case err != nil || got.Coins != saved[v.Ver]:
			t.Errorf("ReadVersion of ver %d = %d coins, %v; want %d", v.Ver, got.Coins, err, saved[v.Ver])
		}
	}
	if _, err := d.RestoreAt(ctx, "user:6", vs[len(vs)-1].At, datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrCorruptRecord) {
		t.Fatalf("RestoreAt a version that needs the damaged one = %v, want ErrCorruptRecord", err)
	}
	after := recordFields(t, r, "PlayerData", "user:6")
	if after["ver"] != before["ver"] || after["data"] != before["data"] || after["lock.token"] != "" {
		t.Fatalf("the refused restore changed the record: ver %s → %s, lock %q", before["ver"], after["ver"], after["lock.token"])
	}
}

// listHistory lists the history of the record at rk.
func listHistory(t testing.TB, rdb redis.UniversalClient, rk string) record.History {
	t.Helper()
	res, err := record.Versions(context.Background(), rdb, rk)
	if err != nil {
		t.Fatal(err)
	}
	return res.History
}
