//lint:file-ignore U1000 unexported fields are what these tests are about: types whose fields the codec cannot store

package datadriver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/names"
	"github.com/ckernel/playerdata/testsupport"
)

type (
	lossyStats struct {
		Level  int
		secret string
	}
	withSecret struct {
		Coins  int
		secret string
	}
	withNestedSecret struct {
		Coins int
		Bag   map[string]lossyStats
	}
	withAny struct {
		Coins int
		Extra any
	}
	withAnyMap struct{ Props map[string]any }
	skipped    struct {
		Coins   int
		cache   map[string]int `msgpack:"-"`
		Scratch any            `msgpack:"-"`
	}
)

// plainNode is a Node on its own Redis for tests of NewDriver's checks.
func plainNode(t *testing.T) *datadriver.Node {
	t.Helper()
	r := testsupport.StartRedis(t)
	node, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{
		JobID: "server-a", Redis: r.Client(t), Namespace: r.Namespace,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	return node
}

// TestNewDriverRefusesFieldsThatDoNotRoundTrip: a profile type with an
// unexported or interface-typed field, at any depth, is refused with
// ErrInvalidConfig naming the field, unless the field is tagged to be
// skipped or the config accepts the loss.
func TestNewDriverRefusesFieldsThatDoNotRoundTrip(t *testing.T) {
	node := plainNode(t)
	for _, tc := range []struct {
		name  string
		new   func(node *datadriver.Node, name string, allow bool) error
		paths []string // named in the error; none: accepted
	}{
		{"an unexported field", newDriverOf[withSecret], []string{"withSecret.secret"}},
		{"an unexported field in a map value", newDriverOf[withNestedSecret], []string{"withNestedSecret.Bag[].secret"}},
		{"an any field", newDriverOf[withAny], []string{"withAny.Extra"}},
		{"a map of any", newDriverOf[withAnyMap], []string{"withAnyMap.Props[]"}},
		{`fields tagged msgpack:"-"`, newDriverOf[skipped], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.NewReplacer(" ", "-", `"`, "", ":", "").Replace(tc.name)
			err := tc.new(node, name, false)
			if tc.paths == nil {
				if err != nil {
					t.Fatalf("NewDriver = %v, want it accepted", err)
				}
				return
			}
			if !errors.Is(err, datadriver.ErrInvalidConfig) {
				t.Fatalf("NewDriver = %v, want ErrInvalidConfig", err)
			}
			for _, p := range tc.paths {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("the error does not name %s: %v", p, err)
				}
			}
			if err := tc.new(node, name+"-allowed", true); err != nil {
				t.Errorf("with AllowLossyFields: NewDriver = %v, want it accepted", err)
			}
		})
	}
}

// newDriverOf makes a Driver[T] named name on node.
func newDriverOf[T any](node *datadriver.Node, name string, allow bool) error {
	_, err := datadriver.NewDriver(node, datadriver.Config[T]{Name: name, AllowLossyFields: allow})
	return err
}

// TestAllowLossyFieldsLosesWhatItSays: with the loss accepted, an
// unexported field's value is not stored: it loads as the zero value.
func TestAllowLossyFieldsLosesWhatItSays(t *testing.T) {
	node := plainNode(t)
	d, err := datadriver.NewDriver(node, datadriver.Config[withSecret]{Name: "Secrets", AllowLossyFields: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Update(func(w *withSecret) { w.Coins, w.secret = 5, "s3cr3t" })
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := d.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	q.View(func(w *withSecret) {
		if w.Coins != 5 || w.secret != "" {
			t.Errorf("loaded %+v, want Coins 5 and the unexported field empty", *w)
		}
	})
}

// TestDriverNames: a Name is what Redis keys and NATS subjects carry
// safely: letters, digits, '_' and '-', at most MaxNameBytes.
func TestDriverNames(t *testing.T) {
	node := plainNode(t)
	for _, name := range []string{"", "Player Data", "Player.Data", "Player{Data}", "Player*", "Player>",
		"Player:Data", "Plàyer", "a\tb", strings.Repeat("n", defaults.MaxNameBytes+1)} {
		if err := names.Driver(name); err == nil {
			t.Errorf("names.Driver(%q) = nil, want a refusal", name)
		}
		if _, err := datadriver.NewDriver(node, datadriver.Config[withSecret]{Name: name}); !errors.Is(err, datadriver.ErrInvalidConfig) {
			t.Errorf("NewDriver(Name %q) = %v, want ErrInvalidConfig", name, err)
		}
	}
	for _, name := range []string{"PlayerData", "player_data-2", strings.Repeat("n", defaults.MaxNameBytes)} {
		if _, err := datadriver.NewDriver(node, datadriver.Config[withAny]{Name: name, AllowLossyFields: true}); err != nil {
			t.Errorf("NewDriver(Name %q) = %v, want it accepted", name, err)
		}
	}
}
