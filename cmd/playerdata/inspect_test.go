package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

// profile is the profile type of these tests.
type profile struct{ Coins int }

// fixture is a Redis with one server ("server-a") beating presence and
// holding user:42 of driver PlayerData, saved twice.
type fixture struct {
	url, ns string
	rdb     redis.UniversalClient
}

func newFixture(t *testing.T, e testEnv) fixture {
	t.Helper()
	a := e.startServer(t, "server-a", serverOpts{})
	p := a.hold(t, "user:42", 10)
	_ = p.Update(func(d *profile) { d.Coins = 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitPresence(t, presencecore.KeyFor(e.ns), "server-a", presencecore.Alive)
	return fixture{url: e.url, ns: e.ns, rdb: e.rdb}
}

func testInspect(t *testing.T, e testEnv) {
	f := newFixture(t, e)
	token, err := f.rdb.HGet(context.Background(), record.Key(f.ns, "PlayerData", "user:42"), "lock.token").Result()
	if err != nil || len(token) < 8 {
		t.Fatalf("lock token %q: %v", token, err)
	}

	t.Run("human", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, "inspect", "--redis", f.url, "--namespace", f.ns, "--driver", "PlayerData", "user:42")
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, want := range []string{
			"held by server-a, token " + token[:8] + "…", "presence flag 1", "server-a is alive now",
			"epoch      1", "ver        2", "ver 2 (current)", "ver 1,", "trade      none pending", "which is alive",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("inspect output has no %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, token) {
			t.Errorf("inspect printed the whole lock token:\n%s", r.stdout)
		}
	})

	t.Run("json", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, "inspect", "--json", "--redis", f.url, "--namespace", f.ns, "--driver", "PlayerData", "user:42")
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep inspectReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, r.stdout)
		}
		l := rep.Lock
		switch {
		case !rep.Exists || l == nil:
			t.Fatalf("no record or lock: %s", r.stdout)
		case !l.Held || l.Holder != "server-a" || l.TokenPrefix != token[:8] || !l.PresenceFlag:
			t.Fatalf("lock %+v, want held by server-a, token prefix %s, presence flag", l, token[:8])
		case l.HolderPresence != "alive" || l.HolderExpiresInMS == nil || *l.HolderExpiresInMS <= 0:
			t.Fatalf("holder presence %q (expires in %v), want alive", l.HolderPresence, l.HolderExpiresInMS)
		case l.AgeMS < 0 || l.AgeMS > 10_000:
			t.Fatalf("lock age %v ms", l.AgeMS)
		case rep.Epoch != 1 || rep.Ver != 2 || rep.DataBytes == 0 || rep.Trade != nil:
			t.Fatalf("epoch %d ver %d data %d trade %v, want 1, 2, some data, no trade", rep.Epoch, rep.Ver, rep.DataBytes, rep.Trade)
		case len(rep.Versions) != 2 || rep.Versions[0].Ver != 2 || !rep.Versions[0].Current || rep.Versions[1].Ver != 1:
			t.Fatalf("versions %+v, want 2 (current) and 1", rep.Versions)
		}
	})

	t.Run("pending trade", func(t *testing.T) {
		ctx := context.Background()
		rk := record.Key(f.ns, "PlayerData", "user:43")
		if err := f.rdb.HSet(ctx, rk, "epoch", 1, "ver", 0, "lock.job", "", "lock.token", "", "trade", "t-1").Err(); err != nil {
			t.Fatal(err)
		}
		r := runArgs(t, 10*time.Second, "inspect", "--json", "--redis", f.url, "--namespace", f.ns, "--driver", "PlayerData", "user:43")
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep inspectReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Lock.Held || rep.Trade == nil || rep.Trade.ID != "t-1" || rep.Trade.Error == "" {
			t.Fatalf("report %s: want a free lock and trade t-1 without a journal entry", r.stdout)
		}
	})

	t.Run("missing record", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, "inspect", "--redis", f.url, "--namespace", f.ns, "--driver", "PlayerData", "user:nobody")
		if r.err != nil {
			t.Fatalf("inspect of a missing key = %v, want exit status 0", r.err)
		}
		if !strings.Contains(r.stdout, "no record") {
			t.Fatalf("inspect of a missing key:\n%s", r.stdout)
		}
	})

	for _, tc := range []struct{ name, driver, key, want string }{
		{"empty key", "PlayerData", "", "key is empty"},
		{"control character", "PlayerData", "user\t42", "control character"},
		{"brace in driver", "Player{Data}", "user:42", "brace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 10*time.Second, "inspect", "--redis", f.url, "--driver", tc.driver, "--", tc.key)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("inspect %q = %v, want an error containing %q", tc.key, r.err, tc.want)
			}
		})
	}
}

func testPresence(t *testing.T, e testEnv) {
	f := newFixture(t, e)
	// A server that beat once, long ago.
	if err := f.rdb.HSet(context.Background(), presencecore.KeyFor(f.ns), "server-old", time.Now().Add(-time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}

	r := runArgs(t, 10*time.Second, "presence", "--json", "--redis", f.url, "--namespace", f.ns)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep presenceReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if len(rep.Servers) != 2 {
		t.Fatalf("servers %+v, want server-a and server-old", rep.Servers)
	}
	a, old := rep.Servers[0], rep.Servers[1]
	if a.JobID != "server-a" || a.Status != "alive" || a.ExpiresInMS <= 0 || a.LastBeatMS < 0 || a.LastBeatMS > 10_000 {
		t.Fatalf("server-a: %+v, want alive with a recent beat", a)
	}
	// The hash is younger than one TTL, so a missing beat proves nothing yet.
	if old.JobID != "server-old" || old.Status == "alive" || old.ExpiresInMS >= 0 {
		t.Fatalf("server-old: %+v, want an expired beat", old)
	}

	r = runArgs(t, 10*time.Second, "presence", "--redis", f.url, "--namespace", f.ns)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{presencecore.KeyFor(f.ns), "server-a", "alive", "server-old", "ago"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("presence output has no %q:\n%s", want, r.stdout)
		}
	}

	// A presence hash that exists but has no server in it (only its meta).
	empty := f.ns + "-empty"
	if err := f.rdb.HSet(context.Background(), presencecore.KeyFor(empty), "\x00run", "x").Err(); err != nil {
		t.Fatal(err)
	}
	r = runArgs(t, 10*time.Second, "presence", "--redis", f.url, "--namespace", empty)
	if r.err != nil || !strings.Contains(r.stdout, "no server in the presence hash") {
		t.Fatalf("presence of an empty hash = %v:\n%s", r.err, r.stdout)
	}
}

// A damaged kept version: inspect names it and the deltas that need it,
// and a restore to one of them fails and changes nothing.
func testInspectNamesDamagedVersions(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false) // ver 3 current; 2 kept whole, 1 a delta against it
	ctx := context.Background()
	hk := record.HistoryKey(h.rk)
	raw, err := e.rdb.HGet(ctx, hk, "k2").Bytes() // its header, then its data compressed
	if err != nil {
		t.Fatalf("ver 2 is not kept: %v", err)
	}
	raw[len(raw)-2] ^= 0x40 // in its data
	if err := e.rdb.HSet(ctx, hk, "k2", raw).Err(); err != nil {
		t.Fatal(err)
	}
	rep := h.inspectVersions(t)
	cur, two, one := rep.Versions[0], rep.Versions[1], rep.Versions[2]
	switch {
	case !cur.Current || cur.Unreadable != "":
		t.Errorf("current %+v", cur)
	case two.Stored != "whole" || two.Unreadable == "" || two.Needs != 2:
		t.Errorf("ver 2 %+v, want whole and unreadable", two)
	case one.Stored != "delta" || one.Unreadable == "" || one.Needs != 2:
		t.Errorf("ver 1 %+v, want a delta, unreadable, needing ver 2", one)
	}
	r := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", h.key)...)
	if out := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(out,
		"ver 2 is damaged; ver 1, a delta that needs it, cannot be read either") {
		t.Errorf("inspect does not say which versions are lost:\n%s", r.stdout)
	}
	rec, hist := e.fields(t, h.rk), e.fields(t, hk)
	if _, r := h.restoreJSON(t, "--at", stamp(h.at[1]), h.key); exitStatus(r.err) != exitFailed ||
		!strings.Contains(r.err.Error(), "needs version 2") {
		t.Fatalf("restore of ver 1 = %v, want a failure naming ver 2", r.err)
	}
	if !maps.Equal(e.fields(t, h.rk), rec) || !maps.Equal(e.fields(t, hk), hist) {
		t.Fatal("the failed restore changed the record or its history")
	}

	// A damaged header (a byte of ver 2's time): listed at no time, named
	// as damaged, never at another time.
	raw[len(raw)-2] ^= 0x40
	raw[3] ^= 0x01
	if err := e.rdb.HSet(ctx, hk, "k2", raw).Err(); err != nil {
		t.Fatal(err)
	}
	rep = h.inspectVersions(t)
	if two := rep.Versions[1]; !two.At.IsZero() || !strings.Contains(two.Unreadable, "header does not match its checksum") ||
		two.Needs != 2 || rep.HistoryBytes == 0 {
		t.Errorf("ver 2 with a damaged header: %+v (history %d bytes), want no time, its header named", two, rep.HistoryBytes)
	}
	r = runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", h.key)...)
	if out := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(out, "ver 2, time unknown") ||
		!strings.Contains(out, "bytes in 2 kept versions") {
		t.Errorf("inspect does not name the version whose time is unknown, or the history's bytes:\n%s", r.stdout)
	}
}

// Versions stored whole with text metadata (d<ver>, t<ver>, as builds
// before deltas kept them) are listed, read and restored.
func testInspectAndRestoreWholeTextVersions(t *testing.T, e testEnv) {
	t.Setenv(envNATS, "")
	h := newHistory(t, e, "", false) // ver 3 current; 2 and 1 kept
	ctx := context.Background()
	hk := record.HistoryKey(h.rk)
	res, err := record.Versions(ctx, e.rdb, h.rk)
	if err != nil {
		t.Fatal(err)
	}
	hist := res.History
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var fields []any
	for _, v := range hist.Versions {
		data, err := hist.Read(ctx, e.rdb, h.rk, v.Ver, dec)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, record.HistDataField(v.Ver), record.AppendWholeText(nil, enc, data),
			record.HistMetaField(v.Ver), fmt.Sprintf("%d,%d,%d", v.At.UnixMilli(), v.Schema, v.SchemaMin))
	}
	if err := e.rdb.Del(ctx, hk).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, hk, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	rep := h.inspectVersions(t)
	for _, v := range rep.Versions[1:] {
		if v.Stored != record.FormWholeText.String() || v.Unreadable != "" || !v.At.Equal(h.at[v.Ver]) {
			t.Errorf("ver %d: %+v, want readable, whole with text metadata, written %s", v.Ver, v, h.at[v.Ver])
		}
	}
	if rep, r := h.restoreJSON(t, "--at", stamp(h.at[1]), h.key); r.err != nil || rep.Outcome != restoreDone {
		t.Fatalf("restore of ver 1: %+v, %v", rep, r.err)
	}
	if got := e.fields(t, h.rk)[record.FieldData]; got != h.data[1] {
		t.Fatalf("data after the restore %x, want ver 1's %x", got, h.data[1])
	}
	if c := h.a.joinCoins(t, h.key); c != 10 {
		t.Fatalf("a join after the restore loads %d coins, want 10", c)
	}
}

// inspectVersions runs inspect --json on h's record and returns its
// report, which lists the three versions.
func (h *history) inspectVersions(t *testing.T) inspectReport {
	t.Helper()
	r := runArgs(t, 10*time.Second, h.e.args("inspect", "--json", "--driver", "PlayerData", h.key)...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep inspectReport
	decodeJSON(t, r.stdout, &rep)
	if len(rep.Versions) != 3 {
		t.Fatalf("versions %+v, want 3, 2 and 1", rep.Versions)
	}
	return rep
}
