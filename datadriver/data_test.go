package datadriver_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/testsupport"
)

// newDriver creates a driver of any profile type on s.
func newDriver[T any](tb testing.TB, s *server, cfg datadriver.Config[T]) *datadriver.Driver[T] {
	tb.Helper()
	if cfg.Name == "" {
		cfg.Name = "PlayerData"
	}
	if cfg.LockWait == 0 {
		cfg.LockWait = 2 * time.Second
	}
	if cfg.Autosave == 0 {
		cfg.Autosave = -1
	}
	d, err := datadriver.NewDriver(s.node, cfg)
	if err != nil {
		tb.Fatalf("NewDriver: %v", err)
	}
	return d
}

// Two builds of one game during a rolling deploy.
type (
	settingsV1 struct{ Volume int }
	playerV1   struct {
		Coins    int
		Settings settingsV1
		Items    map[string]itemV1
	}
	itemV1 struct{ Count int }

	settingsV2 struct {
		Volume    int
		Subtitles bool
	}
	playerV2 struct {
		Coins    int
		Gems     int
		Settings settingsV2
		Items    map[string]itemV2
	}
	itemV2 struct{ Count, Durability int }
)

// A player who goes v2 → v1 → v2 keeps every field v1 does not know: at
// the top, nested, and inside the values of a map.
func TestRollingDeployKeepsNewerFields(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	v2 := newDriver(t, pr.a, datadriver.Config[playerV2]{Defaults: playerV2{Gems: 5, Settings: settingsV2{Volume: 80, Subtitles: true}}})
	v1 := newDriver(t, pr.b, datadriver.Config[playerV1]{Defaults: playerV1{Settings: settingsV1{Volume: 80}}})

	p, err := v2.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *playerV2) {
		d.Coins, d.Gems = 10, 77
		d.Settings = settingsV2{Volume: 30, Subtitles: false}
		d.Items = map[string]itemV2{"sword": {Count: 1, Durability: 42}}
	})
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	q, err := v1.Join(ctx, "user:1") // the old build plays, and saves
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Update(func(d *playerV1) {
		d.Coins += 5
		it := d.Items["sword"]
		it.Count++
		d.Items["sword"] = it
		d.Items["shield"] = itemV1{Count: 1}
	})
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}

	r, err := v2.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	var got playerV2
	r.View(func(d *playerV2) { got = *d })
	want := playerV2{Coins: 15, Gems: 77, Settings: settingsV2{Volume: 30, Subtitles: false},
		Items: map[string]itemV2{"sword": {Count: 2, Durability: 42}, "shield": {Count: 1}}}
	if got.Coins != want.Coins || got.Gems != want.Gems || got.Settings != want.Settings ||
		len(got.Items) != 2 || got.Items["sword"] != want.Items["sword"] || got.Items["shield"] != want.Items["shield"] {
		t.Fatalf("after v2 → v1 → v2: %+v, want %+v", got, want)
	}
}

type (
	nestedV1 struct {
		Coins     int
		Inventory map[string]int
	}
	optionsV2 struct {
		Music  int
		Effect int
	}
	nestedV2 struct {
		Coins     int
		Inventory map[string]int
		Options   optionsV2
		Badges    []string
	}
)

// A field the record lacks takes its default at every depth, a nil map or
// slice becomes an empty one where Defaults has one, and stored values win.
func TestDefaultsAllTheWayDown(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	old := newDriver(t, pr.a, datadriver.Config[nestedV1]{})
	p, err := old.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *nestedV1) { d.Coins = 3 }) // Inventory stays nil
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}

	d := newDriver(t, pr.b, datadriver.Config[nestedV2]{Defaults: nestedV2{
		Coins: 100, Inventory: map[string]int{"potion": 1}, Options: optionsV2{Music: 70, Effect: 90}, Badges: []string{},
	}})
	q, err := d.Join(ctx, "user:2")
	if err != nil {
		t.Fatal(err)
	}
	var got nestedV2
	q.View(func(d *nestedV2) { got = *d })
	if got.Coins != 3 {
		t.Errorf("Coins %d: the stored value must win over the default 100", got.Coins)
	}
	if got.Options != (optionsV2{Music: 70, Effect: 90}) {
		t.Errorf("Options %+v: a nested struct the record lacks takes the defaults", got.Options)
	}
	if got.Inventory == nil || got.Badges == nil {
		t.Fatalf("Inventory %v, Badges %v: a nil map or slice must come back empty where Defaults has one", got.Inventory, got.Badges)
	}
	if len(got.Inventory) != 0 {
		t.Errorf("Inventory %v: a stored map (here nil) replaces the default's items, never merges them", got.Inventory)
	}
	if err := q.Update(func(d *nestedV2) { d.Inventory["sword"]++ }); err != nil {
		t.Errorf("incrementing a map entry: %v", err)
	}
}

type bag struct {
	Coins     int
	Inventory map[string]int
}

// An idle player's autosaves write nothing but the lock refresh: the
// encoding is deterministic, so unchanged data is seen to be unchanged.
func TestIdleSavesWriteNoVersions(t *testing.T) {
	r := testsupport.StartRedis(t)
	s := newServer(t, r, "server-a")
	d := newDriver(t, s, datadriver.Config[bag]{})
	ctx := ctxT(t)
	p, err := d.Join(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *bag) {
		d.Inventory = make(map[string]int)
		for i := range 40 {
			d.Inventory["item-"+strconv.Itoa(i)] = i
		}
	})
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	ver := recordFields(t, r, "PlayerData", "user:3")["ver"]
	for range 10 {
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := recordFields(t, r, "PlayerData", "user:3")["ver"]; got != ver {
		t.Fatalf("ver went %s → %s over 10 saves of unchanged data; want no new version", ver, got)
	}
	vs, err := d.Versions(ctx, "user:3")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) > 2 {
		t.Errorf("%d versions kept after one change and 10 idle saves", len(vs))
	}
}

// Data over MaxDataBytes never traps the player: saves refuse it (and the
// game hears of it through OnSaveError), the release frees the lock with
// the last data that fit, and the next join anywhere gets that at once.
func TestOversizedDataNeverTrapsThePlayer(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	saveErrs := make(chan error, 8)
	cfg := datadriver.Config[bag]{MaxDataBytes: 512, Autosave: 50 * time.Millisecond,
		OnSaveError: func(_ string, err error) { saveErrs <- err }}
	da, db := newDriver(t, pr.a, cfg), newDriver(t, pr.b, datadriver.Config[bag]{MaxDataBytes: 512})
	p, err := da.Join(ctx, "user:4")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *bag) { d.Coins = 7 })
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(d *bag) {
		d.Inventory = make(map[string]int)
		for i := range 100 {
			d.Inventory["a-rather-long-item-name-"+strconv.Itoa(i)] = i
		}
	})
	if err := p.Save(ctx); !errors.Is(err, datadriver.ErrTooLarge) {
		t.Fatalf("Save of oversized data = %v, want ErrTooLarge", err)
	}
	select {
	case err := <-saveErrs:
		if !errors.Is(err, datadriver.ErrTooLarge) {
			t.Fatalf("OnSaveError got %v, want ErrTooLarge", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the failing autosave was not reported to OnSaveError")
	}
	if err := p.Release(ctx); !errors.Is(err, datadriver.ErrTooLarge) {
		t.Fatalf("Release of oversized data = %v, want ErrTooLarge", err)
	}
	if !errors.Is(p.Err(), datadriver.ErrReleased) {
		t.Fatalf("after the release: Err = %v, want ErrReleased (the lock is freed all the same)", p.Err())
	}
	start := time.Now()
	q, err := db.Load(ctx, "user:4", datadriver.LoadOptions{HandoffWait: -1}) // no wait at all
	if err != nil {
		t.Fatalf("join elsewhere after the oversized release: %v", err)
	}
	var got bag
	q.View(func(d *bag) { got = *d })
	if got.Coins != 7 || len(got.Inventory) != 0 {
		t.Fatalf("loaded %+v, want the last data that fit (7 coins, no inventory)", got)
	}
	t.Logf("joined elsewhere %s after the release", time.Since(start))
}

// storedBag reads key's data straight from Redis.
func storedBag(tb testing.TB, r *testsupport.Redis, key string) bag {
	tb.Helper()
	var b bag
	if raw := recordFields(tb, r, "PlayerData", key)["data"]; raw != "" {
		if err := msgpack.Unmarshal([]byte(raw), &b); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

// A panicking game callback never takes the server down, never lands half
// a change, and comes back as an error matching ErrCallbackPanic.
func TestCallbackPanicsAreContained(t *testing.T) {
	t.Run("Update: the session ends without the half made change", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		s := newServer(t, r, "server-a")
		kicks := make(chan datadriver.KickReason, 4)
		d := newDriver(t, s, datadriver.Config[bag]{Kick: func(_ string, reason datadriver.KickReason) { kicks <- reason }})
		ctx := ctxT(t)
		p, err := d.Join(ctx, "user:5")
		if err != nil {
			t.Fatal(err)
		}
		other, err := d.Join(ctx, "user:6")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *bag) { d.Coins = 10 })
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		err = p.Update(func(d *bag) {
			d.Coins = 999 // half made
			panic("game bug")
		})
		if !errors.Is(err, datadriver.ErrCallbackPanic) {
			t.Fatalf("Update with a panicking fn = %v, want ErrCallbackPanic", err)
		}
		if reason := <-kicks; reason != datadriver.ReasonCallbackFailed {
			t.Errorf("Kick reason %v, want ReasonCallbackFailed", reason)
		}
		eventually(t, 5*time.Second, "the lock is given back", func() bool {
			return recordFields(t, r, "PlayerData", "user:5")["lock.token"] == ""
		})
		if got := storedBag(t, r, "user:5"); got.Coins != 10 {
			t.Fatalf("stored coins %d, want the last landed save (10): the half made change landed", got.Coins)
		}
		if err := other.Update(func(d *bag) { d.Coins++ }); err != nil {
			t.Errorf("another player on the server: %v", err)
		}
		if err := other.Save(ctx); err != nil {
			t.Errorf("another player's save: %v", err)
		}
	})

	t.Run("OnRelease: the data before the cleanups is saved", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		s := newServer(t, r, "server-a")
		d := newDriver(t, s, datadriver.Config[bag]{})
		ctx := ctxT(t)
		p, err := d.Join(ctx, "user:7")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *bag) { d.Coins = 20 })
		p.OnRelease(func(d *bag) { d.Coins = -1; panic("cleanup bug") })
		err = p.Release(ctx)
		if !errors.Is(err, datadriver.ErrCallbackPanic) {
			t.Fatalf("Release = %v, want ErrCallbackPanic", err)
		}
		if !errors.Is(p.Err(), datadriver.ErrReleased) {
			t.Fatalf("Err = %v, want ErrReleased", p.Err())
		}
		if got := storedBag(t, r, "user:7"); got.Coins != 20 {
			t.Fatalf("stored coins %d, want 20 (the data before the panicking cleanup)", got.Coins)
		}
	})

	t.Run("Kick and OnLockLost during a handoff", func(t *testing.T) {
		pr := newPair(t)
		ctx := ctxT(t)
		cfg := datadriver.Config[bag]{
			Kick:       func(string, datadriver.KickReason) { panic("kick bug") },
			OnLockLost: func(string, error) { panic("lock-lost bug") },
		}
		da, db := newDriver(t, pr.a, cfg), newDriver(t, pr.b, datadriver.Config[bag]{})
		p, err := da.Join(ctx, "user:8")
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *bag) { d.Coins = 30 })
		q, err := db.Join(ctx, "user:8") // A's Kick panics while it hands over
		if err != nil {
			t.Fatalf("join on B while A's Kick panics: %v", err)
		}
		var got bag
		q.View(func(d *bag) { got = *d })
		if got.Coins != 30 {
			t.Fatalf("B loaded %d coins, want A's 30", got.Coins)
		}
		// A is still serving: a new player joins there.
		if _, err := da.Join(ctx, "user:9"); err != nil {
			t.Fatalf("A after the panics: %v", err)
		}
		eventually(t, 5*time.Second, "the panic is logged with its stack", func() bool {
			return containsAll(pr.a.logs.String(), "game callback panicked", "kick bug", "goroutine")
		})
	})

	t.Run("a trade function", func(t *testing.T) {
		r := testsupport.StartRedis(t)
		s := newServer(t, r, "server-a")
		d := newDriver(t, s, datadriver.Config[bag]{})
		ctx := ctxT(t)
		a, err := d.Join(ctx, "user:10")
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Join(ctx, "user:11")
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Update(func(d *bag) { d.Coins = 50 })
		err = datadriver.Trade(ctx, func(tx *datadriver.Tx) error {
			datadriver.TradeData(tx, a).Coins = 0
			panic("trade bug")
		}, a, b)
		if !errors.Is(err, datadriver.ErrCallbackPanic) {
			t.Fatalf("Trade = %v, want ErrCallbackPanic", err)
		}
		var coins int
		a.View(func(d *bag) { coins = d.Coins })
		if coins != 50 {
			t.Fatalf("coins %d after the panicking trade, want 50", coins)
		}
		if err := a.Update(func(d *bag) { d.Coins++ }); err != nil {
			t.Fatalf("Update after the panicking trade: %v", err)
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
