package datacodec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The schema of PlayerV3 went through three changes:
//
//	0 -> 1: Gold renamed Coins (not backward compatible)
//	1 -> 2: Stats added, Wins moved into it (not backward compatible)
//	2 -> 3: Title added, defaulting to "Rookie" for old players (compatible)
type StatsV3 struct{ Wins, Losses int }

type PlayerV3 struct {
	Coins int
	Stats StatsV3
	Title string
	Log   []string
}

func playerMigrations(log bool) []Migration {
	note := func(m map[string]any, s string) {
		if log {
			l, _ := m["Log"].([]any)
			m["Log"] = append(l, s)
		}
	}
	return []Migration{
		{Apply: func(m map[string]any) error {
			m["Coins"] = m["Gold"]
			delete(m, "Gold")
			note(m, "0->1")
			return nil
		}},
		{Apply: func(m map[string]any) error {
			m["Stats"] = map[string]any{"Wins": m["Wins"]}
			delete(m, "Wins")
			note(m, "1->2")
			return nil
		}},
		{BackwardCompatible: true, Apply: func(m map[string]any) error {
			if _, ok := m["Title"]; !ok {
				m["Title"] = "Rookie"
			}
			note(m, "2->3")
			return nil
		}},
	}
}

// TestMigrationsRunInOrderFromTheStoredVersion.
func TestMigrationsRunInOrderFromTheStoredVersion(t *testing.T) {
	c := mustNew(t, PlayerV3{Log: []string{}}, Options{Migrations: playerMigrations(true)})
	tests := []struct {
		name   string
		from   int
		record map[string]any
		want   PlayerV3
	}{
		{"version 0: all three", 0, map[string]any{"Gold": 5, "Wins": 2},
			PlayerV3{Coins: 5, Stats: StatsV3{Wins: 2}, Title: "Rookie", Log: []string{"0->1", "1->2", "2->3"}}},
		{"version 1: the last two", 1, map[string]any{"Coins": 5, "Wins": 2},
			PlayerV3{Coins: 5, Stats: StatsV3{Wins: 2}, Title: "Rookie", Log: []string{"1->2", "2->3"}}},
		{"version 2: the last one, which keeps a stored title", 2, map[string]any{"Coins": 5, "Stats": map[string]any{"Wins": 2}, "Title": "Hero"},
			PlayerV3{Coins: 5, Stats: StatsV3{Wins: 2}, Title: "Hero", Log: []string{"2->3"}}},
		{"current version: none", 3, map[string]any{"Coins": 5},
			PlayerV3{Coins: 5, Log: []string{}}},
		{"newer version (the caller's check passed): none", 7, map[string]any{"Coins": 5},
			PlayerV3{Coins: 5, Log: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unk, err := c.Decode(marshal(t, tt.record), tt.from)
			if err != nil {
				t.Fatal(err)
			}
			if unk != nil {
				t.Fatalf("unknown fields after migrating: %q", unk.Paths())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMigrationsSeeLooseValues: what Apply gets for each stored type, and
// that fields T does not know survive a migration.
func TestMigrationsSeeLooseValues(t *testing.T) {
	when := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var seen map[string]string
	c := mustNew(t, struct{ Keep int }{}, Options{Migrations: []Migration{{Apply: func(m map[string]any) error {
		seen = map[string]string{}
		for k, v := range m {
			seen[k] = fmt.Sprintf("%T", v)
		}
		return nil
	}}}})
	record := map[string]any{
		"small": int8(1), "neg": -3, "big": uint64(1 << 63), "f": float32(1.5), "s": "x", "b": []byte{1}, "t": when,
		"arr": []any{1}, "map": map[string]any{"a": 1}, "intkeys": map[int]int{1: 2}, "nil": nil, "yes": true, "Keep": 1,
	}
	_, unk, err := c.Decode(marshal(t, record), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"small": "int64", "neg": "int64", "big": "uint64", "f": "float64", "s": "string", "b": "[]uint8", "t": "time.Time",
		"arr": "[]interface {}", "map": "map[string]interface {}", "intkeys": "map[interface {}]interface {}", "nil": "<nil>",
		"yes": "bool", "Keep": "int64",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("Apply saw %v\nwant %v", seen, want)
	}
	if got := len(unk.Paths()); got != len(record)-1 {
		t.Fatalf("%d unknown fields kept through the migration, want %d: %q", got, len(record)-1, unk.Paths())
	}
}

// TestMigrationFailures: an error or a panic names the migration; Decode
// refuses a negative version.
func TestMigrationFailures(t *testing.T) {
	boom := errors.New("boom")
	ok := Migration{BackwardCompatible: true, Apply: func(map[string]any) error { return nil }}
	tests := []struct {
		name      string
		ms        []Migration
		from      int
		record    []byte
		wantIndex int
		check     func(t *testing.T, err error)
	}{
		{"error", []Migration{ok, {Apply: func(map[string]any) error { return boom }}}, 0, nil, 1,
			func(t *testing.T, err error) {
				if !errors.Is(err, boom) {
					t.Fatalf("%v does not wrap the migration's error", err)
				}
			}},
		{"panic", []Migration{{Apply: func(m map[string]any) error { _ = m["x"].(string); return nil }}}, 0, nil, 0,
			func(t *testing.T, err error) {
				var pe *PanicError
				if !errors.As(err, &pe) {
					t.Fatalf("%v is not a *PanicError", err)
				}
				if !strings.Contains(string(pe.Stack), "TestMigrationFailures") {
					t.Fatalf("stack does not show the migration:\n%s", pe.Stack)
				}
			}},
		{"top level is not a map", []Migration{ok}, 0, marshal(t, []int{1}), -1,
			func(t *testing.T, err error) {
				if !errors.Is(err, ErrTypeMismatch) {
					t.Fatalf("%v is not ErrTypeMismatch", err)
				}
			}},
		{"negative version", []Migration{ok}, -1, nil, -1,
			func(t *testing.T, err error) {
				if !errors.Is(err, ErrInvalidVersion) {
					t.Fatalf("%v is not ErrInvalidVersion", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, struct{ X int }{}, Options{Migrations: tt.ms})
			record := tt.record
			if record == nil {
				record = marshal(t, map[string]any{"x": 1})
			}
			_, _, err := c.Decode(record, tt.from)
			if err == nil {
				t.Fatal("no error")
			}
			var me *MigrationError
			if tt.wantIndex >= 0 && (!errors.As(err, &me) || me.Index != tt.wantIndex) {
				t.Fatalf("%v: want a *MigrationError of migration %d", err, tt.wantIndex)
			}
			tt.check(t, err)
		})
	}
}

// TestVersionAndMinReader: and WriteVersion never lowers what was stored.
func TestVersionAndMinReader(t *testing.T) {
	bc := Migration{BackwardCompatible: true, Apply: func(map[string]any) error { return nil }}
	breaking := Migration{Apply: func(map[string]any) error { return nil }}
	tests := []struct {
		name               string
		ms                 []Migration
		version, minReader int
	}{
		{"no migrations", nil, 0, 0},
		{"compatible only", []Migration{bc, bc}, 2, 0},
		{"breaking first", []Migration{breaking, bc, bc}, 3, 1},
		{"breaking in the middle", []Migration{bc, breaking, bc}, 3, 2},
		{"breaking last", []Migration{bc, breaking}, 2, 2},
		{"the rolling-deploy example", playerMigrations(false), 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustNew(t, struct{}{}, Options{Migrations: tt.ms})
			if c.Version() != tt.version || c.MinReader() != tt.minReader {
				t.Fatalf("Version %d, MinReader %d; want %d, %d", c.Version(), c.MinReader(), tt.version, tt.minReader)
			}
			if v, m := c.WriteVersion(0, 0); v != tt.version || m != tt.minReader {
				t.Fatalf("a new record is stamped %d, %d", v, m)
			}
			if v, m := c.WriteVersion(9, 8); v != 9 || m != 8 {
				t.Fatalf("a newer record is stamped %d, %d: lower than it was", v, m)
			}
		})
	}
}

// TestNewRefusesInvalidOptions.
func TestNewRefusesInvalidOptions(t *testing.T) {
	type withChan struct{ C chan int }
	type withIgnoredChan struct {
		C chan int `msgpack:"-"`
		X int
	}
	type withIntern struct {
		S string `msgpack:",intern"`
	}
	tests := []struct {
		name string
		new  func() error
		ok   bool
	}{
		{"migration without Apply", func() error { _, err := New(struct{}{}, Options{Migrations: []Migration{{}}}); return err }, false},
		{"tag name with a quote", func() error { _, err := New(struct{}{}, Options{TagName: `json"`}); return err }, false},
		{"a chan field", func() error { _, err := New(withChan{}, Options{}); return err }, false},
		{"the intern option", func() error { _, err := New(withIntern{}, Options{}); return err }, false},
		{"an ignored chan field", func() error { _, err := New(withIgnoredChan{}, Options{}); return err }, true},
		{"json tags", func() error { _, err := New(struct{}{}, Options{TagName: "json"}); return err }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.new()
			if tt.ok != (err == nil) || !tt.ok && !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New: %v", err)
			}
		})
	}
}
