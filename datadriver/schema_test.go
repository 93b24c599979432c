package datadriver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

type (
	gearV1 struct{ Count int }
	heroV1 struct {
		Gold  int
		Items map[string]gearV1
	}
	gearV2 struct{ Count, Durability int }
	heroV2 struct {
		Gold  int
		Items map[string]gearV2
	}
	heroV3 struct { // Gold renamed Gems: not backward compatible
		Gems  int
		Items map[string]gearV2
	}
)

// addDurability is the v1 → v2 migration: every existing item gets
// Durability 100 (backward compatible: v1 keeps it as an unknown field).
var addDurability = datadriver.Migration{BackwardCompatible: true, Apply: func(m map[string]any) error {
	items, _ := m["Items"].(map[string]any)
	for _, it := range items {
		if item, ok := it.(map[string]any); ok {
			if _, set := item["Durability"]; !set {
				item["Durability"] = int64(100)
			}
		}
	}
	return nil
}}

// renameGold is the v2 → v3 migration: Gold becomes Gems.
var renameGold = datadriver.Migration{Apply: func(m map[string]any) error {
	m["Gems"] = m["Gold"]
	delete(m, "Gold")
	return nil
}}

func TestMigrations(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	v1 := newDriver(t, pr.a, datadriver.Config[heroV1]{})
	p, err := v1.Join(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *heroV1) { d.Gold = 40; d.Items = map[string]gearV1{"axe": {Count: 1}} })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// v2 loads a v1 record: the migration runs before decoding; the save
	// writes schema version 1, min-reader 0 (backward compatible).
	v2 := newDriver(t, pr.b, datadriver.Config[heroV2]{Migrations: []datadriver.Migration{addDurability}})
	q, err := v2.Join(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	var h2 heroV2
	q.View(func(d *heroV2) { h2 = *d })
	if h2.Gold != 40 || h2.Items["axe"] != (gearV2{Count: 1, Durability: 100}) {
		t.Fatalf("v2 loaded %+v, want Gold 40 and the axe at Durability 100", h2)
	}
	_ = q.Update(func(d *heroV2) { d.Gold++ })
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := recordFields(t, pr.r, "PlayerData", "hero:1"); rec["schema"] != "1" || rec["schema.min"] != "0" {
		t.Fatalf("record schema %q min %q, want 1 and 0", rec["schema"], rec["schema.min"])
	}

	// v1 still reads it (backward compatible) and keeps Durability.
	p, err = v1.Join(ctx, "hero:1")
	if err != nil {
		t.Fatalf("v1 on a backward-compatible v2 record: %v", err)
	}
	_ = p.Update(func(d *heroV1) { d.Gold++ })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := recordFields(t, pr.r, "PlayerData", "hero:1"); rec["schema"] != "1" {
		t.Fatalf("v1's save lowered the schema version to %q", rec["schema"])
	}
	q, err = v2.Join(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	q.View(func(d *heroV2) { h2 = *d })
	if h2.Gold != 42 || h2.Items["axe"].Durability != 100 {
		t.Fatalf("v2 after v1 saved: %+v, want Gold 42 and Durability kept", h2)
	}

	// v3 renames a field: not backward compatible. Once v3 saved, v1 and v2
	// refuse the record at once, leave it untouched, and take no lock.
	v3srv := newServer(t, pr.r, "server-c", fast, withNATS(t, pr.n))
	v3 := newDriver(t, v3srv, datadriver.Config[heroV3]{Migrations: []datadriver.Migration{addDurability, renameGold}})
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := v3.Join(ctx, "hero:1")
	if err != nil {
		t.Fatal(err)
	}
	var h3 heroV3
	h.View(func(d *heroV3) { h3 = *d })
	if h3.Gems != 42 {
		t.Fatalf("v3 loaded %+v, want Gems 42 (renamed from Gold)", h3)
	}
	_ = h.Update(func(d *heroV3) { d.Gems++ })
	if err := h.Save(ctx); err != nil {
		t.Fatal(err)
	}
	before := recordFields(t, pr.r, "PlayerData", "hero:1")
	if before["schema"] != "2" || before["schema.min"] != "2" {
		t.Fatalf("v3's record schema %q min %q, want 2 and 2", before["schema"], before["schema.min"])
	}
	for name, join := range map[string]func() error{
		"v1": func() error { _, err := v1.Join(ctx, "hero:1"); return err },
		"v2": func() error { _, err := v2.Join(ctx, "hero:1"); return err },
	} {
		start := time.Now()
		err := join()
		if !errors.Is(err, datadriver.ErrSchemaTooNew) {
			t.Fatalf("%s's join on a v3 record = %v, want ErrSchemaTooNew", name, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s was refused after %s; want at once (no wait for v3's lock)", name, took)
		}
	}
	after := recordFields(t, pr.r, "PlayerData", "hero:1")
	for _, f := range []string{"data", "ver", "epoch", "lock.token", "lock.job"} {
		if before[f] != after[f] {
			t.Errorf("field %s changed from %q to %q by a refused load", f, before[f], after[f])
		}
	}
}

func TestMigrationFailureRefusesTheLoad(t *testing.T) {
	tests := []struct {
		name      string
		apply     func(map[string]any) error
		wantPanic bool
	}{
		{"an error", func(map[string]any) error { return errors.New("cannot upgrade") }, false},
		{"a panic", func(m map[string]any) error { _ = m["Gold"].(string); return nil }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := testsupport.StartRedis(t)
			a, b := newServer(t, r, "server-a"), newServer(t, r, "server-b")
			ctx := ctxT(t)
			v1 := newDriver(t, a, datadriver.Config[heroV1]{})
			p, err := v1.Join(ctx, "hero:2")
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Update(func(d *heroV1) { d.Gold = 8 })
			if err := p.Release(ctx); err != nil {
				t.Fatal(err)
			}
			before := recordFields(t, r, "PlayerData", "hero:2")
			v2 := newDriver(t, b, datadriver.Config[heroV2]{Migrations: []datadriver.Migration{{Apply: tc.apply}}})
			_, err = v2.Join(ctx, "hero:2")
			var me *datadriver.MigrationError
			if !errors.Is(err, datadriver.ErrMigration) || !errors.As(err, &me) || me.Index != 0 {
				t.Fatalf("join = %v, want a *MigrationError for migration 0", err)
			}
			if got := errors.Is(err, datadriver.ErrCallbackPanic); got != tc.wantPanic {
				t.Errorf("errors.Is(err, ErrCallbackPanic) = %t, want %t", got, tc.wantPanic)
			}
			eventually(t, 5*time.Second, "the lock is given back", func() bool {
				return recordFields(t, r, "PlayerData", "hero:2")["lock.token"] == ""
			})
			after := recordFields(t, r, "PlayerData", "hero:2")
			if before["data"] != after["data"] || before["ver"] != after["ver"] {
				t.Fatal("a refused migration changed the record")
			}
			// The old build still loads it.
			if _, err := v1.Join(ctx, "hero:2"); err != nil {
				t.Fatalf("v1 after the refused migration: %v", err)
			}
		})
	}
}

// A record whose current data does not decode says which field failed, and
// RestoreAt repairs it with an older version.
func TestCorruptRecordRepairedByRestore(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := newDriver(t, s, datadriver.Config[heroV1]{History: 5})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "hero:3")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *heroV1) { d.Gold = 11 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	// Versions are told apart by their write time (ms, Redis clock): write
	// the next one at a later millisecond.
	time.Sleep(3 * time.Millisecond)
	_ = p.Update(func(d *heroV1) { d.Gold = 12 })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions(ctx, "hero:3")
	if err != nil || len(vs) != 2 || vs[1].Ver != 1 {
		t.Fatalf("versions %+v, %v; want the current one and version 1", vs, err)
	}
	good := vs[1].At // when the version with 11 gold was written
	// Something writes a string where Items["axe"].Count is an int.
	bad := map[string]any{"Gold": 12, "Items": map[string]any{"axe": map[string]any{"Count": "lots"}}}
	raw, err := msgpackMarshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	rk := record.Key(r.Namespace, "PlayerData", "hero:3")
	if err := r.Client(t).HSet(ctx, rk, "data", raw).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = d.Load(ctx, "hero:3", datadriver.LoadOptions{})
	var cerr *datadriver.CorruptRecordError
	if !errors.As(err, &cerr) || cerr.Path != "data" {
		t.Fatalf("Load of data another tool wrote = %v, want a CorruptRecordError at data (its checksum)", err)
	}
	// Written as a record without a checksum (format 1, an earlier build's),
	// its data is decoded, and the decode names the field.
	if err := r.Client(t).HSet(ctx, rk, "fmt", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client(t).HDel(ctx, rk, "sum").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the lock is given back", func() bool {
		return recordFields(t, r, "PlayerData", "hero:3")["lock.token"] == ""
	})
	_, err = d.Load(ctx, "hero:3", datadriver.LoadOptions{})
	if !errors.As(err, &cerr) || cerr.Path != `Items["axe"].Count` {
		t.Fatalf("Load of a corrupt record = %v, want a CorruptRecordError at Items[\"axe\"].Count", err)
	}
	eventually(t, 5*time.Second, "the lock is given back", func() bool {
		return recordFields(t, r, "PlayerData", "hero:3")["lock.token"] == ""
	})

	q, err := d.RestoreAt(ctx, "hero:3", good, datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("RestoreAt over corrupt current data: %v", err)
	}
	var got heroV1
	q.View(func(d *heroV1) { got = *d })
	if got.Gold != 11 {
		t.Fatalf("restored %+v, want the version with 11 gold", got)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Join(ctx, "hero:3"); err != nil {
		t.Fatalf("join after the repair: %v", err)
	}
}

type tagged struct {
	Coins int    `json:"coins"`
	Name  string `json:"name,omitempty"`
}

// TagName "json" names stored fields by their json tags.
func TestJSONTagNames(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := newDriver(t, s, datadriver.Config[tagged]{TagName: "json"})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:12")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *tagged) { d.Coins, d.Name = 3, "ada" })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpackUnmarshal([]byte(recordFields(t, r, "PlayerData", "user:12")["data"]), &m); err != nil {
		t.Fatal(err)
	}
	if m["coins"] == nil || m["name"] != "ada" || m["Coins"] != nil {
		t.Fatalf("stored fields %v, want json names coins and name", m)
	}
}
