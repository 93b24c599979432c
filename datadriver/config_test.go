package datadriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/testsupport"
)

func TestConfigRefused(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  datadriver.NodeConfig
	}{
		{"no Redis", datadriver.NodeConfig{JobID: "a"}},
		{"a JobID that is not a subject token", datadriver.NodeConfig{JobID: "server.a", Redis: rdb}},
		{"a JobID with a space", datadriver.NodeConfig{JobID: "server a", Redis: rdb}},
		{"a negative SaveTimeout", datadriver.NodeConfig{JobID: "a", Redis: rdb, SaveTimeout: -time.Second}},
		{"a presence TTL shorter than the beat", datadriver.NodeConfig{JobID: "a", Redis: rdb, Beat: 5 * time.Second, PresenceTTL: 2 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := datadriver.NewNode(ctx, tc.cfg); !errors.Is(err, datadriver.ErrInvalidConfig) {
				t.Fatalf("NewNode = %v, want ErrInvalidConfig", err)
			}
		})
	}

	s := newServer(t, r, "server-a")
	for _, tc := range []struct {
		name string
		cfg  datadriver.Config[player]
	}{
		{"no Name", datadriver.Config[player]{}},
		{"a Name with a brace", datadriver.Config[player]{Name: "Player{Data}"}},
		{"a negative LockWait", datadriver.Config[player]{Name: "P1", LockWait: -time.Second}},
		{"a History beyond the maximum", datadriver.Config[player]{Name: "P2", History: defaults.MaxHistory + 1}},
		{"a negative MaxDataBytes", datadriver.Config[player]{Name: "P3", MaxDataBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := datadriver.NewDriver(s.node, tc.cfg); !errors.Is(err, datadriver.ErrInvalidConfig) {
				t.Fatalf("NewDriver = %v, want ErrInvalidConfig", err)
			}
		})
	}
	t.Run("Defaults that msgpack cannot encode", func(t *testing.T) {
		_, err := datadriver.NewDriver(s.node, datadriver.Config[func()]{Name: "Funcs", Defaults: func() {}})
		if !errors.Is(err, datadriver.ErrInvalidConfig) {
			t.Fatalf("NewDriver = %v, want ErrInvalidConfig", err)
		}
	})
}
