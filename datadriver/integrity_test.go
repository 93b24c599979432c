package datadriver_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/damage"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// doubleCoins is a migration that doubles the coins: a version read at a
// schema lower than the one it was written at would come back with twice
// its coins.
var doubleCoins = datadriver.Migration{Apply: func(m map[string]any) error {
	if c, ok := m["Coins"].(int64); ok {
		m["Coins"] = 2 * c
	}
	return nil
}}

// attackedHistory is a record whose history the attack edits: its versions
// as listed and read before any edit.
type attackedHistory struct {
	d      *datadriver.Driver[player]
	key    string
	hk     string
	vs     []datadriver.Version
	coins  map[int64]int
	fields map[string]string // the history hash as written
}

// newAttackedHistory saves a profile n times, each save keeping a version,
// with a driver one migration (doubleCoins) in: every version is at schema
// 1.
func newAttackedHistory(t *testing.T, r *testsupport.Redis, key string, n int) *attackedHistory {
	t.Helper()
	d := players(t, newServer(t, r, "server-a"), func(c *datadriver.Config[player]) {
		c.HistoryEvery, c.Migrations = time.Millisecond, []datadriver.Migration{doubleCoins}
	})
	a := &attackedHistory{d: d, key: key, hk: record.HistoryKey(record.Key(r.Namespace, "PlayerData", key))}
	a.coins = fillHistory(t, d, key, n)
	ctx := ctxT(t)
	var err error
	if a.vs, err = d.Versions(ctx, key); err != nil || len(a.vs) != n {
		t.Fatalf("versions %+v, %v; want %d", a.vs, err, n)
	}
	if a.fields, err = r.Client(t).HGetAll(ctx, a.hk).Result(); err != nil {
		t.Fatal(err)
	}
	return a
}

// check fails unless every version is listed as written or refused, and
// reads back as written or is refused (ErrCorruptRecord, or ErrSchemaTooNew
// for what reads as a newer build's layout): never at another time, never
// other data.
func (a *attackedHistory) check(t *testing.T, what string) { a.checkGone(t, what, 0) }

// checkGone is check, where version gone may be missing altogether (every
// field of the oldest version deleted is a trim: ReadVersion then answers
// ErrNoVersion at its time).
func (a *attackedHistory) checkGone(t *testing.T, what string, gone int64) {
	t.Helper()
	ctx := context.Background()
	vs, err := a.d.Versions(ctx, a.key)
	if err != nil {
		t.Fatalf("%s: Versions = %v", what, err)
	}
	for _, v := range vs {
		i := slices.IndexFunc(a.vs, func(w datadriver.Version) bool { return w.Ver == v.Ver })
		switch {
		case i < 0:
			t.Fatalf("%s: Versions lists ver %d, which was never kept", what, v.Ver)
		case v.Err != nil:
			if !errors.Is(v.Err, datadriver.ErrCorruptRecord) && !errors.Is(v.Err, datadriver.ErrSchemaTooNew) {
				t.Fatalf("%s: ver %d listed with %v, want ErrCorruptRecord", what, v.Ver, v.Err)
			}
		case !v.At.Equal(a.vs[i].At):
			t.Fatalf("%s: ver %d listed at %s, written at %s", what, v.Ver, v.At, a.vs[i].At)
		}
	}
	for _, v := range a.vs[1:] {
		got, err := a.d.ReadVersion(ctx, a.key, v.At)
		switch {
		case err != nil:
			if v.Ver == gone && errors.Is(err, datadriver.ErrNoVersion) {
				continue
			}
			if !errors.Is(err, datadriver.ErrCorruptRecord) && !errors.Is(err, datadriver.ErrSchemaTooNew) {
				t.Fatalf("%s: ReadVersion of ver %d = %v, want the data or ErrCorruptRecord", what, v.Ver, err)
			}
		case got.Coins != a.coins[v.Ver]:
			t.Fatalf("%s: ReadVersion of ver %d = %d coins with no error, want %d (refused or as written)", what, v.Ver,
				got.Coins, a.coins[v.Ver])
		}
	}
}

// The attack of issue 32 on a history the driver wrote: every byte of every
// field of the history hash flipped (one bit, all bits), each field cut short
// at every byte and extended. Versions never lists a version at another
// time, ReadVersion never returns other data (a flipped schema never runs
// a migration again): each is refused with ErrCorruptRecord, or reads as
// written.
func TestHistoryAttackEveryByte(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newAttackedHistory(t, r, "user:32", 4) // the current data, three kept: two deltas and a whole one
	c := r.Client(t)
	ctx := ctxT(t)
	a.check(t, "as written")
	names := make([]string, 0, len(a.fields))
	for name := range a.fields {
		names = append(names, name)
	}
	slices.Sort(names)
	edits := 0
	defer func() {
		t.Logf("%d edits of %d fields, each followed by Versions and %d ReadVersions", edits, len(names), len(a.vs)-1)
	}()
	set := func(name, value string) {
		if err := c.HSet(ctx, a.hk, name, value).Err(); err != nil {
			t.Fatal(err)
		}
		edits++
	}
	for _, name := range names {
		orig := a.fields[name]
		damage.Every([]byte(orig), func(v []byte, what string) {
			set(name, string(v))
			a.check(t, name+" "+what)
		})
		if err := c.HDel(ctx, a.hk, name).Err(); err != nil {
			t.Fatal(err)
		}
		a.checkGone(t, name+" deleted", oldest(a))
		set(name, orig)
	}
}

// One bit of a kept version's schema flipped (1 → 0): the version is
// refused by ReadVersion and RestoreAt, never migrated again (the issue saw
// 256 coins for 128, written as the current data by the restore), and the
// record is left as it was.
func TestHistoryFlippedSchemaIsRefused(t *testing.T) {
	r := testsupport.StartRedis(t)
	a := newAttackedHistory(t, r, "user:33", 3)
	c := r.Client(t)
	ctx := ctxT(t)
	newest := a.vs[1]
	field := "k" + itoa(int(newest.Ver))
	b := []byte(a.fields[field])
	// The header: layout, length, then at (6 uvarint bytes for a time of
	// these years), then the schema: 1, flipped to 0.
	if b[8] != 1 {
		t.Fatalf("byte 8 of %s is %d, want its schema 1", field, b[8])
	}
	b[8] ^= 1
	if err := c.HSet(ctx, a.hk, field, string(b)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.d.ReadVersion(ctx, a.key, newest.At); !errors.Is(err, datadriver.ErrCorruptRecord) {
		t.Fatalf("ReadVersion of the flipped version = %v, want ErrCorruptRecord", err)
	}
	before := recordFields(t, r, "PlayerData", a.key)
	if _, err := a.d.RestoreAt(ctx, a.key, newest.At, datadriver.LoadOptions{}); !errors.Is(err, datadriver.ErrCorruptRecord) {
		t.Fatalf("RestoreAt the flipped version = %v, want ErrCorruptRecord", err)
	}
	after := recordFields(t, r, "PlayerData", a.key)
	if after["data"] != before["data"] || after["ver"] != before["ver"] {
		t.Fatal("the refused restore changed the record")
	}
	var ce *datadriver.CorruptRecordError
	if _, err := a.d.ReadVersion(ctx, a.key, newest.At); !errors.As(err, &ce) || ce.Path != "history version "+itoa(int(newest.Ver)) {
		t.Fatalf("the error %v does not name the version", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// oldest is the oldest kept version of a: when it is stored in one field,
// deleting that field is a trim.
func oldest(a *attackedHistory) int64 { return a.vs[len(a.vs)-1].Ver }

// The attack of issue 32 on a record's fields: every byte of the fields a
// load reads beside the lock (data, schema, schema.min, ver, at, user ids,
// metadata, the checksum) flipped, each cut short at every byte, extended
// and deleted. A load is refused with ErrCorruptRecord naming a field and
// leaves the record as it was, or loads exactly what was saved; a flipped
// schema never runs a migration again.
func TestRecordAttackEveryByte(t *testing.T) {
	r := testsupport.StartRedis(t)
	d := players(t, newServer(t, r, "server-a"), func(c *datadriver.Config[player]) {
		c.Migrations = []datadriver.Migration{doubleCoins}
	})
	ctx := ctxT(t)
	const key = "user:34"
	p, err := d.Join(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *player) { d.Coins, d.Name, d.Items = 128, "hero", map[string]int{"sword": 1} })
	p.SetUserIDs("42")
	p.SetMeta("guild", "owls")
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := r.Client(t)
	rk := record.Key(r.Namespace, "PlayerData", key)
	orig := recordFields(t, r, "PlayerData", key)
	if orig["fmt"] != "2" || orig["sum"] == "" {
		t.Fatalf("the record as saved: %v, want format 2 with its checksum", orig)
	}
	edits := 0
	check := func(what string) {
		t.Helper()
		edits++
		before := recordFields(t, r, "PlayerData", key)
		q, err := d.Load(ctx, key, datadriver.LoadOptions{})
		if err != nil {
			// A schema.min made larger is refused before the lock is taken, as
			// a record for a newer build: refused all the same, untouched.
			if !errors.Is(err, datadriver.ErrCorruptRecord) && !errors.Is(err, datadriver.ErrSchemaTooNew) {
				t.Fatalf("%s: Load = %v, want the data or ErrCorruptRecord", what, err)
			}
			eventually(t, 5*time.Second, "the lock is given back", func() bool {
				return recordFields(t, r, "PlayerData", key)["lock.token"] == ""
			})
			after := recordFields(t, r, "PlayerData", key)
			for _, f := range []string{"data", "ver", "schema", "sum", "uids", "meta"} {
				if after[f] != before[f] {
					t.Fatalf("%s: the refused load changed %s", what, f)
				}
			}
			return
		}
		var got player
		q.View(func(d *player) { got = *d })
		ids, meta := q.UserIDs(), q.Meta()
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got.Coins != 128 || got.Name != "hero" || got.Items["sword"] != 1 || len(ids) != 1 || ids[0] != "42" ||
			meta["guild"] != "owls" {
			t.Fatalf("%s: loaded %+v, ids %v, meta %v with no error; want what was saved or ErrCorruptRecord", what, got, ids, meta)
		}
	}
	restore := func() {
		t.Helper()
		vals := []any{}
		for _, f := range []string{"data", "ver", "at", "schema", "schema.min", "uids", "meta", "sum", "fmt"} {
			vals = append(vals, f, orig[f])
		}
		if err := c.HSet(ctx, rk, vals...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"data", "schema", "schema.min", "ver", "at", "uids", "meta", "sum"} {
		damage.Every([]byte(orig[f]), func(v []byte, what string) {
			c.HSet(ctx, rk, f, string(v))
			check(f + " " + what)
			restore()
		})
		c.HDel(ctx, rk, f)
		check(f + " deleted")
		restore()
	}
	t.Logf("%d edits, each followed by a Load", edits)
}
