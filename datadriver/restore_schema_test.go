package datadriver_test

import (
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// A restore stamps the data with the schema version it is at: a server one
// migration behind that restores a version written before the migration
// writes it as that older version, so the newer servers migrate it again on
// load instead of reading old-shaped data as new.
func TestRestoreStampsTheVersionsSchema(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	const key = "hero:9"
	cfg := func(m ...datadriver.Migration) datadriver.Config[heroV2] {
		return datadriver.Config[heroV2]{Migrations: m, HistoryEvery: time.Millisecond}
	}
	// The older server knows no migration: its data is schema version 0.
	old := newDriver(t, pr.a, datadriver.Config[heroV1]{HistoryEvery: time.Millisecond})
	newer := newDriver(t, pr.b, cfg(addDurability))

	p, err := old.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *heroV1) { d.Gold = 10; d.Items = map[string]gearV1{"axe": {Count: 1}} })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the versions' times differ (ms)
	q, err := newer.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Update(func(d *heroV2) { d.Gold = 20; d.Items["axe"] = gearV2{Count: 1, Durability: 50} })
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := recordFields(t, pr.r, "PlayerData", key); rec["schema"] != "1" {
		t.Fatalf("record schema %q after the newer server's save, want 1", rec["schema"])
	}
	vs, err := old.Versions(ctx, key)
	if err != nil || len(vs) < 2 {
		t.Fatalf("Versions = %+v, %v; want the current data and the older server's", vs, err)
	}
	first := vs[len(vs)-1] // the older server's write, at schema 0

	// The older server restores its own version.
	r, err := old.RestoreAt(ctx, key, first.At, datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt: %v", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := recordFields(t, pr.r, "PlayerData", key); rec["schema"] != "0" {
		t.Errorf("record schema %q after the restore of a schema-0 version, want 0", rec["schema"])
	}
	// The newer server migrates it again: the axe gets its Durability 100.
	q, err = newer.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Release(ctx) }()
	var h heroV2
	q.View(func(d *heroV2) { h = *d })
	if h.Gold != 10 || h.Items["axe"] != (gearV2{Count: 1, Durability: 100}) {
		t.Errorf("the newer server loaded %+v after the restore, want Gold 10 and the axe migrated (Durability 100)", h)
	}
}
