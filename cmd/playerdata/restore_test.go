package main

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// history is a profile saved three times with coins 10, 20, 30 by a server
// that keeps a version on every write (HistoryEvery 1 ms): ver 3 is the
// current data, vers 1 and 2 are kept. The server still runs.
type history struct {
	e    testEnv
	a    *testServer
	key  string
	rk   string
	data map[int64]string    // the stored data bytes of each ver
	at   map[int64]time.Time // the write time of each ver
	live *datadriver.Profile[profile]
}

// newHistory saves user:42 three times on server-a (with NATS when natsURL
// is set), and releases it unless keep (then h.live is the live session).
func newHistory(t *testing.T, e testEnv, natsURL string, keep bool) *history {
	t.Helper()
	h := &history{e: e, key: "user:42", rk: e.rk("PlayerData", "user:42"),
		data: map[int64]string{}, at: map[int64]time.Time{}}
	h.a = e.startServer(t, "server-a", serverOpts{historyEvery: time.Millisecond, natsURL: natsURL})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := h.a.players.Join(ctx, h.key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int{10, 20, 30} {
		// A version is kept by a write at least HistoryEvery (1 ms) after
		// the last one, on the Redis clock.
		e.waitRedisPast(t, h.lastAt())
		if err := p.Update(func(d *profile) { d.Coins = c }); err != nil {
			t.Fatal(err)
		}
		if err := p.Save(ctx); err != nil {
			t.Fatal(err)
		}
		f := e.fields(t, h.rk)
		res, err := record.Versions(ctx, e.rdb, h.rk)
		if err != nil {
			t.Fatal(err)
		}
		h.data[res.Ver], h.at[res.Ver] = f[record.FieldData], res.At
	}
	if len(h.data) != 3 || h.data[1] == h.data[2] {
		t.Fatalf("versions %v, want 1 to 3 with different data", h.at)
	}
	if keep {
		h.live = p
	} else if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// lastAt is the newest write time so far.
func (h *history) lastAt() time.Time {
	var last time.Time
	for _, at := range h.at {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// waitRedisPast waits until Redis's clock is at least 2 ms past t.
func (e testEnv) waitRedisPast(t *testing.T, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now, err := e.rdb.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.Sub(at) >= 2*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Redis clock stays at %s", now)
		}
		time.Sleep(time.Millisecond)
	}
}

// fields reads every field of a hash.
func (e testEnv) fields(t *testing.T, key string) map[string]string {
	t.Helper()
	f, err := e.rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// joinCoins loads key on s and returns its coins, then releases it.
func (s *testServer) joinCoins(t *testing.T, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.players.Join(ctx, key)
	if err != nil {
		t.Fatalf("%s joins %s: %v", s.job, key, err)
	}
	defer func() { _ = p.Release(ctx) }()
	return coins(p)
}

// restoreJSON runs restore --json and returns its report and error.
func (h *history) restoreJSON(t *testing.T, extra ...string) (restoreReport, result) {
	t.Helper()
	r := runArgs(t, 30*time.Second, h.e.args("restore", append([]string{"--json", "--driver", "PlayerData"}, extra...)...)...)
	var rep restoreReport
	if r.stdout != "" {
		decodeJSON(t, r.stdout, &rep)
	}
	return rep, r
}

func testRestoreDryRunChangesNothing(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false)
	rec, hist := e.fields(t, h.rk), e.fields(t, record.HistoryKey(h.rk))

	rep, r := h.restoreJSON(t, "--dry-run", "--at", stamp(h.at[2]), h.key)
	if r.err != nil {
		t.Fatalf("restore --dry-run: %v\n%s", r.err, r.stderr)
	}
	tg := rep.Target
	switch {
	case rep.Outcome != restoreWould || tg == nil:
		t.Fatalf("report %+v, want would-restore", rep)
	case tg.Ver != 2 || !tg.At.Equal(h.at[2]) || tg.Bytes != len(h.data[2]) || tg.Schema != 0:
		t.Fatalf("target %+v, want ver 2 written %s, %d bytes, schema 0", tg, h.at[2], len(h.data[2]))
	case rep.Current == nil || rep.Current.Ver != 3:
		t.Fatalf("current %+v, want ver 3", rep.Current)
	}
	if got := e.fields(t, h.rk); !maps.Equal(got, rec) {
		t.Fatalf("--dry-run changed the record:\n%v\nwas\n%v", got, rec)
	}
	if got := e.fields(t, record.HistoryKey(h.rk)); !maps.Equal(got, hist) {
		t.Fatalf("--dry-run changed the history")
	}

	r = runArgs(t, 30*time.Second, e.args("restore", "--dry-run", "--driver", "PlayerData", "--at", stamp(h.at[2]), h.key)...)
	out := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"restore ver 2, written " + stamp(h.at[2]), "bytes, schema 0",
		"dry run: restore would make ver 2's data", "nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore --dry-run output has no %q:\n%s", want, r.stdout)
		}
	}
	if !maps.Equal(e.fields(t, h.rk), rec) {
		t.Fatal("--dry-run changed the record")
	}
}

func testRestoreBringsBackAnOlderVersion(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false)

	// A time between ver 1's write and ver 2's: the newest at or before is ver 1.
	rep, r := h.restoreJSON(t, "--at", stamp(h.at[1].Add(time.Millisecond/2)), h.key)
	if r.err != nil {
		t.Fatalf("restore: %v\n%s", r.err, r.stderr)
	}
	if rep.Outcome != restoreDone || rep.Target.Ver != 1 || rep.NewVer != 4 || rep.Replaced == nil || rep.Replaced.Ver != 3 {
		t.Fatalf("report %+v, want ver 1 restored as ver 4, ver 3 kept", rep)
	}
	f := e.fields(t, h.rk)
	if f[record.FieldData] != h.data[1] {
		t.Fatalf("data after restore %x, want ver 1's bytes %x", f[record.FieldData], h.data[1])
	}
	if l := e.lockOf(t, h.rk); l.Held() {
		t.Fatalf("restore left the lock held by %s", l.Job)
	}
	if c := h.a.joinCoins(t, h.key); c != 10 {
		t.Fatalf("a join after the restore loads %d coins, want ver 1's 10", c)
	}

	// The data the restore replaced is kept: the undo the report names.
	if !strings.Contains(rep.Reason, "undo: restore --at "+stamp(h.at[3])) {
		t.Fatalf("reason %q names no undo", rep.Reason)
	}
	if _, r := h.restoreJSON(t, "--at", stamp(h.at[3]), h.key); r.err != nil {
		t.Fatalf("undo: %v", r.err)
	}
	if got := e.fields(t, h.rk)[record.FieldData]; got != h.data[3] {
		t.Fatalf("data after the undo %x, want ver 3's %x", got, h.data[3])
	}

	// Relative times look back on the Redis clock: nothing is an hour old.
	_, r = h.restoreJSON(t, "--at", "-1h", h.key)
	if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "no kept version at or before") {
		t.Fatalf("restore --at -1h = %v, want status 2, no version that old", r.err)
	}
	// Now is the current data: nothing to do.
	rep, r = h.restoreJSON(t, "--at", "-0s", h.key)
	if r.err != nil || rep.Outcome != restoreCurrent {
		t.Fatalf("restore --at -0s = %v %+v, want nothing to do", r.err, rep)
	}
}

func testRestoreOfACorruptRecord(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false)
	// The current data (ver 3) is not msgpack: every load fails.
	garbage := "\xc1\x00garbage"
	if err := e.rdb.HSet(context.Background(), h.rk, record.FieldData, garbage).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.a.players.Join(ctx, h.key); err == nil {
		t.Fatal("a corrupt record loaded")
	}

	// As of now there is only the corrupt data: nothing to restore.
	_, r := h.restoreJSON(t, "--at", "-0s", h.key)
	if exitStatus(r.err) != exitUsage || !strings.Contains(r.err.Error(), "which does not decode: pick a time before") {
		t.Fatalf("restore of the corrupt current data = %v, want status 2", r.err)
	}

	r = runArgs(t, 30*time.Second, e.args("restore", "--driver", "PlayerData", "--at", stamp(h.at[2]), h.key)...)
	if r.err != nil {
		t.Fatalf("restore: %v\n%s", r.err, r.stderr)
	}
	out := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"current ver 3", "corrupt: its data does not decode as msgpack at byte 0",
		"restore ver 2", "restored: ver 2's data is the current data again, written as ver 4"} {
		if !strings.Contains(out, want) {
			t.Errorf("restore output has no %q:\n%s", want, r.stdout)
		}
	}
	if got := e.fields(t, h.rk)[record.FieldData]; got != h.data[2] {
		t.Fatalf("data after restore %x, want ver 2's %x", got, h.data[2])
	}
	if c := h.a.joinCoins(t, h.key); c != 20 {
		t.Fatalf("a join after the restore loads %d coins, want 20", c)
	}
	// Nothing stored is lost: the corrupt data is kept as ver 3.
	res, err := record.Versions(context.Background(), e.rdb, h.rk)
	if hist := res.History; err != nil || !hist.Has(3) {
		t.Fatalf("the corrupt data is not kept as ver 3: %+v %v", res.History, err)
	}
}

func testRestoreTakesTheLockLikeAnyLoad(t *testing.T, e testEnv) {
	n := testsupport.StartNATS(t)
	h := newHistory(t, e, n.URL, true) // server-a keeps the profile live
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)
	rec := e.fields(t, h.rk)

	t.Run("without NATS", func(t *testing.T) {
		t.Setenv(envNATS, "")
		_, r := h.restoreJSON(t, "--at", stamp(h.at[1]), h.key)
		if exitStatus(r.err) != exitFailed {
			t.Fatalf("restore of a live profile without NATS = %v, want status 1", r.err)
		}
		for _, want := range []string{"refused", `"user:42" is locked by server server-a`, "give --nats so that server-a hands the profile over"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("error %q has no %q", r.err, want)
			}
		}
		if r.took > 5*time.Second {
			t.Errorf("the refusal took %s, want at once", r.took)
		}
		if got := e.fields(t, h.rk); !maps.Equal(got, rec) {
			t.Fatalf("a refused restore changed the record")
		}
	})

	t.Run("with NATS", func(t *testing.T) {
		// Progress not saved yet: server-a saves it as it hands over.
		if err := h.live.Update(func(d *profile) { d.Coins = 99 }); err != nil {
			t.Fatal(err)
		}
		rep, r := h.restoreJSON(t, "--nats", n.URL, "--at", stamp(h.at[1]), h.key)
		if r.err != nil {
			t.Fatalf("restore with NATS: %v\n%s", r.err, r.stderr)
		}
		if n := strings.Count(r.stderr, "not authenticated"); n > 1 {
			t.Errorf("restore --nats says %d times that requests are not authenticated, want at most once:\n%s", n, r.stderr)
		}
		if rep.Holder != "server-a" || rep.HolderPresence != "alive" || rep.Outcome != restoreDone {
			t.Fatalf("report %+v, want server-a alive, then restored", rep)
		}
		// What the restore replaced is the hand-over save (ver 4), kept.
		if rep.Current.Ver != 3 || rep.Replaced == nil || rep.Replaced.Ver != 4 || rep.NewVer != 5 ||
			!strings.Contains(rep.Reason, "server-a saved ver 4 as it handed the profile over") {
			t.Fatalf("report %+v (replaced %+v), want ver 4 (the hand-over save) replaced and kept, ver 5 written", rep, rep.Replaced)
		}
		select {
		case <-h.live.Done(): // server-a handed the profile over: its session ended
		case <-time.After(5 * time.Second):
			t.Fatal("server-a's session is still live after the restore")
		}
		if got := e.fields(t, h.rk)[record.FieldData]; got != h.data[1] {
			t.Fatalf("data %x, want ver 1's %x", got, h.data[1])
		}
		if c := h.a.joinCoins(t, h.key); c != 10 {
			t.Fatalf("server-a's next join loads %d coins, want 10", c)
		}
		// The undo the report names brings the hand-over save back; when
		// the restore wrote in the hand-over save's millisecond, the report
		// says no time tells them apart instead.
		if !strings.Contains(rep.Reason, "(undo: restore --at "+stamp(rep.Replaced.At)+")") {
			at := e.fields(t, h.rk)[record.FieldAt]
			if !strings.Contains(rep.Reason, "written in the same millisecond as ver 5") ||
				at != strconv.FormatInt(rep.Replaced.At.UnixMilli(), 10) {
				t.Fatalf("reason %q (ver 5 written at %s, ver 4 at %d): want an undo line, or the same millisecond",
					rep.Reason, at, rep.Replaced.At.UnixMilli())
			}
			return
		}
		if _, r := h.restoreJSON(t, "--at", stamp(rep.Replaced.At), h.key); r.err != nil {
			t.Fatalf("undo: %v", r.err)
		}
		if c := h.a.joinCoins(t, h.key); c != 99 {
			t.Fatalf("after the undo a join loads %d coins, want the hand-over save's 99", c)
		}
	})
}

func testRestoreKeepsToTheRecordsSchema(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false) // vers 1 to 3 at schema 0
	// A newer build whose one migration older servers cannot read.
	b := e.startServer(t, "server-b", serverOpts{historyEvery: time.Millisecond, migrations: []datadriver.Migration{
		{Apply: func(d map[string]any) error { d["Coins"] = d["Coins"].(int64) * 100; return nil }},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []int{4000, 5000} { // vers 4 and 5 at schema 1; ver 3 kept at schema 0
		e.waitRedisPast(t, h.lastAt())
		p, err := b.players.Join(ctx, h.key)
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Update(func(d *profile) { d.Coins = c })
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		res, _ := record.Versions(ctx, e.rdb, h.rk)
		h.at[res.Ver], h.data[res.Ver] = res.At, e.fields(t, h.rk)[record.FieldData]
	}
	rec := e.fields(t, h.rk)
	if rec[record.FieldSchema] != "1" || rec[record.FieldSchemaMin] != "1" {
		t.Fatalf("schema %q min %q, want 1 and 1", rec[record.FieldSchema], rec[record.FieldSchemaMin])
	}

	// Ver 3 was written at schema 0: only the game's migration may bring it back.
	_, r := h.restoreJSON(t, "--at", stamp(h.at[3]), h.key)
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "ver 3 was written at schema version 0 and the record is at 1") {
		t.Fatalf("restore across a migration = %v, want a refusal", r.err)
	}
	if !maps.Equal(e.fields(t, h.rk), rec) {
		t.Fatal("a refused restore changed the record")
	}

	// Ver 4, at the record's own schema, is restored as it was, still schema 1.
	rep, r := h.restoreJSON(t, "--at", stamp(h.at[4]), h.key)
	if r.err != nil || rep.Target.Schema != 1 {
		t.Fatalf("restore of ver 4 = %v %+v", r.err, rep)
	}
	f := e.fields(t, h.rk)
	if f[record.FieldData] != h.data[4] || f[record.FieldSchema] != "1" || f[record.FieldSchemaMin] != "1" {
		t.Fatalf("after restore: schema %q min %q, data %x; want ver 4's data %x at schema 1",
			f[record.FieldSchema], f[record.FieldSchemaMin], f[record.FieldData], h.data[4])
	}
	if c := b.joinCoins(t, h.key); c != 4000 {
		t.Fatalf("server-b loads %d coins, want 4000 (no migration run again)", c)
	}
}

func TestParseAt(t *testing.T) {
	now := time.Date(2024, 6, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		err  string
	}{
		{"2024-06-10T09:00:00Z", time.Date(2024, 6, 10, 9, 0, 0, 0, time.UTC), ""},
		{"2024-06-10T09:00:00.123+02:00", time.Date(2024, 6, 10, 7, 0, 0, 123e6, time.UTC), ""},
		{"-2h", now.Add(-2 * time.Hour), ""},
		{"-1h30m", now.Add(-90 * time.Minute), ""},
		{"2h", time.Time{}, "a relative TIME looks back: -2h"},
		{"-2days", time.Time{}, "not a duration"},
		{"yesterday", time.Time{}, "want RFC 3339"},
	} {
		s, err := parseAt(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseAt(%q) = %v, want an error with %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("parseAt(%q): %v", tc.in, err)
		case tc.err == "" && !s.resolve(now).Equal(tc.want):
			t.Errorf("parseAt(%q) = %s, want %s", tc.in, s.resolve(now), tc.want)
		}
	}
}
