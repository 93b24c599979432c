package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

func testPresenceKey(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{presenceKey: "GamePresence"})
	a.hold(t, "user:42", 10)
	e.waitPresence(t, e.ns+":GamePresence", "server-a", presencecore.Alive)

	t.Run("presence", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("presence", "--json", "--presence-key", "GamePresence")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep presenceReport
		decodeJSON(t, r.stdout, &rep)
		if rep.Key != e.ns+":GamePresence" || len(rep.Servers) != 1 || rep.Servers[0].JobID != "server-a" || rep.Servers[0].Status != "alive" {
			t.Fatalf("presence --presence-key GamePresence: %s", r.stdout)
		}
		// Without the flag, the default hash does not exist: said so, status 0
		// (the namespace has records).
		r = runArgs(t, 10*time.Second, e.args("presence")...)
		if r.err != nil || !strings.Contains(r.stdout, "no presence hash: no server has beaten into "+e.ns+":CKPresence") {
			t.Fatalf("presence without --presence-key = %v:\n%s", r.err, r.stdout)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--presence-key", "GamePresence", "--driver", "PlayerData", "user:42")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep inspectReport
		decodeJSON(t, r.stdout, &rep)
		if rep.PresenceKey != e.ns+":GamePresence" || rep.Lock.HolderPresence != "alive" {
			t.Fatalf("inspect --presence-key GamePresence: %s", r.stdout)
		}
		// Read from the default hash, the live holder is not known alive.
		r = runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:42")...)
		decodeJSON(t, r.stdout, &rep)
		if rep.Lock.HolderPresence == "alive" {
			t.Fatalf("inspect read server-a alive from a hash it does not beat into: %s", r.stdout)
		}
	})

	t.Run("unlock refuses without the servers' hash", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:42")...)
		if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "there is no presence hash "+e.ns+":CKPresence") {
			t.Fatalf("unlock = %v", r.err)
		}
		r = runArgs(t, 10*time.Second, e.args("unlock", "--presence-key", "GamePresence", "--driver", "PlayerData", "user:42")...)
		if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "server-a is alive") {
			t.Fatalf("unlock = %v", r.err)
		}
	})

	t.Run("locks", func(t *testing.T) {
		r := runArgs(t, 10*time.Second, e.args("locks", "--json", "--presence-key", "GamePresence", "--job", "server-a")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		var rep locksReport
		decodeJSON(t, r.stdout, &rep)
		if rep.Presence.Status != "alive" || len(rep.Locks) != 1 {
			t.Fatalf("locks --presence-key GamePresence: %s", r.stdout)
		}
	})
}

func testMistypedNamespace(t *testing.T, e testEnv) {
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	typo := e.ns + "x" // no key starts with it, and no server beats under it
	want := `namespace "` + typo + `" has no records and no servers: is the namespace right?`
	for _, args := range [][]string{
		{"inspect", "--driver", "PlayerData", "user:42"},
		{"inspect", "--json", "--driver", "PlayerData", "user:42"},
		{"presence"},
		{"locks", "--job", "server-a"},
		{"unlock", "--driver", "PlayerData", "user:42"},
		{"unlock", "user:42"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			full := append([]string{args[0], "--redis", e.url, "--namespace", typo}, args[1:]...)
			r := runArgs(t, 10*time.Second, full...)
			// It lists the namespaces that hold records, the closest first.
			listed := want + `; namespaces with records, closest first: "` + e.ns + `" (drivers PlayerData)`
			if r.err == nil || !strings.HasPrefix(r.err.Error(), listed) || exitStatus(r.err) != exitUsage {
				t.Fatalf("run(%q) = %v (status %d), want %q… with status 2", full, r.err, exitStatus(r.err), listed)
			}
			if r.stdout != "" {
				t.Fatalf("run(%q) printed:\n%s", full, r.stdout)
			}
		})
	}

	// The right namespace, a key never loaded: "no record", status 0.
	r := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:nobody")...)
	if r.err != nil || !strings.Contains(r.stdout, "no record") {
		t.Fatalf("inspect of a missing key = %v:\n%s", r.err, r.stdout)
	}
}

// gameData is a profile as a game might store it.
type gameData struct {
	Coins  int
	Items  map[string]int
	Slots  map[int]string
	Joined time.Time
	Avatar []byte
}

func testInspectData(t *testing.T, e testEnv) {
	joined := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	data, err := msgpack.Marshal(gameData{Coins: 250, Items: map[string]int{"sword": 1}, Slots: map[int]string{1: "sword"},
		Joined: joined, Avatar: []byte("png")})
	if err != nil {
		t.Fatal(err)
	}
	rk := e.rk("PlayerData", "user:1")
	e.putRecord(t, rk, record.FieldEpoch, 1, record.FieldVer, 1, record.FieldData, data, record.FieldLockToken, "", record.FieldLockJob, "")

	r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--data", "--driver", "PlayerData", "user:1")...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep inspectReport
	decodeJSON(t, r.stdout, &rep)
	want := `{"Coins":250,"Items":{"sword":1},"Slots":{"1":"sword"},"Joined":"2026-01-02T03:04:05Z","Avatar":"cG5n"}`
	if mustCompact(t, string(rep.Data)) != mustCompact(t, want) {
		t.Fatalf("data %s, want %s", rep.Data, want)
	}
	if rep.Corrupt != nil || !strings.Contains(rep.Verdict, "the lock is free") {
		t.Fatalf("report %s", r.stdout)
	}

	r = runArgs(t, 10*time.Second, e.args("inspect", "--data", "--driver", "PlayerData", "user:1")...)
	if r.err != nil || !strings.Contains(r.stdout, `"Coins": 250`) || !strings.Contains(r.stdout, `"1": "sword"`) {
		t.Fatalf("inspect --data = %v:\n%s", r.err, r.stdout)
	}
	// Without --data, no data.
	r = runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:1")...)
	if r.err != nil || strings.Contains(r.stdout, "Coins") {
		t.Fatalf("inspect without --data = %v:\n%s", r.err, r.stdout)
	}

	t.Run("written by a server", func(t *testing.T) {
		a := e.startServer(t, "server-a", serverOpts{})
		a.hold(t, "user:42", 77)
		r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--data", "--driver", "PlayerData", "user:42")...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		decodeJSON(t, r.stdout, &rep)
		if mustCompact(t, string(rep.Data)) != `{"Coins":77}` || rep.Format != "2" || rep.Corrupt != nil {
			t.Fatalf("data %s (format %s, corrupt %v), want {\"Coins\":77} in a checksummed record", rep.Data, rep.Format,
				rep.Corrupt)
		}
		// A digit of the data changed (77 → 78: it still decodes): named by
		// the record's checksum.
		rk := e.rk("PlayerData", "user:42")
		data, err := e.rdb.HGet(context.Background(), rk, record.FieldData).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)-1]++
		if err := e.rdb.HSet(context.Background(), rk, record.FieldData, data).Err(); err != nil {
			t.Fatal(err)
		}
		r = runArgs(t, 10*time.Second, e.args("inspect", "--json", "--driver", "PlayerData", "user:42")...)
		decodeJSON(t, r.stdout, &rep)
		if rep.Corrupt == nil || rep.Corrupt.Field != record.FieldData || !strings.Contains(rep.Verdict, "does not match its checksum") {
			t.Fatalf("inspect of damaged data: corrupt %+v, verdict %q; want the data named", rep.Corrupt, rep.Verdict)
		}
	})
}

func testInspectCorrupt(t *testing.T, e testEnv) {
	good, err := msgpack.Marshal(struct { // a struct keeps its field order: "ada" is last
		Coins int
		Name  string
	}{250, "ada"})
	if err != nil {
		t.Fatal(err)
	}
	cut := good[:len(good)-2] // "ada" loses two bytes: it starts at byte len-4
	for _, tc := range []struct {
		name   string
		fields []any
		want   []string
		offset int // -1: none
		field  string
	}{
		{"data cut short, lock free", []any{record.FieldData, cut, record.FieldLockToken, ""},
			[]string{"the record is corrupt: its data does not decode as msgpack at byte", "ErrCorruptRecord"}, len(good) - 4, "data"},
		{"data cut short, lock held", []any{record.FieldData, cut, record.FieldLockToken, "tok-0123456789", record.FieldLockJob, "server-q",
			record.FieldLockPresence, "1", record.FieldLockAt, time.Now().UnixMilli()},
			[]string{"the record is corrupt", "its lock is held by server-q"}, len(good) - 4, "data"},
		{"metadata", []any{record.FieldData, good, record.FieldMeta, []byte{0xc1}, record.FieldLockToken, ""},
			[]string{"its meta does not decode as msgpack at byte 0"}, 0, "meta"},
		{"format too new", []any{record.FieldData, good, record.FieldLockToken, "", record.FieldFormat, record.Format + 1},
			[]string{"newer than this build's"}, -1, "fmt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-")
			e.putRecord(t, e.rk("PlayerData", key), append([]any{record.FieldEpoch, 1, record.FieldVer, 1}, tc.fields...)...)
			r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--data", "--driver", "PlayerData", key)...)
			if r.err != nil {
				t.Fatal(r.err)
			}
			var rep inspectReport
			decodeJSON(t, r.stdout, &rep)
			c := rep.Corrupt
			if c == nil || c.Field != tc.field || (tc.offset >= 0 && (c.Offset == nil || *c.Offset != tc.offset)) {
				t.Fatalf("corrupt %+v, want field %s at %d:\n%s", c, tc.field, tc.offset, r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(rep.Verdict, w) {
					t.Errorf("verdict %q has no %q", rep.Verdict, w)
				}
			}
			for _, never := range []string{"takes it at once", "lock is free", "takes the lock over"} {
				if strings.Contains(rep.Verdict, never) {
					t.Errorf("verdict of a corrupt record says %q: %s", never, rep.Verdict)
				}
			}
			r = runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", key)...)
			if r.err != nil || !strings.Contains(r.stdout, "corrupt") {
				t.Fatalf("inspect = %v:\n%s", r.err, r.stdout)
			}
		})
	}

	t.Run("bytes after the value", func(t *testing.T) {
		e.putRecord(t, e.rk("PlayerData", "trail"), record.FieldEpoch, 1, record.FieldVer, 1, record.FieldLockToken, "",
			record.FieldData, append(append([]byte{}, good...), 0xc0))
		r := runArgs(t, 10*time.Second, e.args("inspect", "--json", "--data", "--driver", "PlayerData", "trail")...)
		var rep inspectReport
		decodeJSON(t, r.stdout, &rep)
		if c := rep.Corrupt; c == nil || c.Offset == nil || *c.Offset != len(good) || !strings.Contains(c.Reason, "1 bytes follow the value") || rep.Data != nil {
			t.Fatalf("report %s", r.stdout)
		}
	})
}

// mustCompact is JSON s re-encoded by encoding/json (sorted keys).
func mustCompact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
