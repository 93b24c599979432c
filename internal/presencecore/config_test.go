package presencecore

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStatusString(t *testing.T) {
	tests := []struct {
		s    Status
		want string
	}{
		{Unknown, "unknown"},
		{Alive, "alive"},
		{Stopped, "stopped"},
		{Status(7), "Status(7)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyFor(t *testing.T) {
	if got := KeyFor("mygame"); got != "mygame:CKPresence" {
		t.Errorf("KeyFor(mygame) = %q", got)
	}
	if got := KeyFor(""); got != "CKPresence" {
		t.Errorf("KeyFor(\"\") = %q", got)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	ok := Config{Key: "ns:CKPresence", JobID: "server-a"}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }

	tests := []struct {
		name string
		cfg  Config
	}{
		{"no key", with(func(c *Config) { c.Key = "" })},
		{"no JobID", with(func(c *Config) { c.JobID = "" })},
		{"JobID with NUL prefix", with(func(c *Config) { c.JobID = "\x00run" })},
		{"negative beat", with(func(c *Config) { c.Beat = -time.Second })},
		{"TTL equal to beat", with(func(c *Config) { c.Beat, c.TTL = time.Second, time.Second })},
		{"TTL under beat", with(func(c *Config) { c.TTL = time.Second })},
		{"TTL under 1ms", with(func(c *Config) { c.Beat, c.TTL, c.FenceMargin = time.Nanosecond, 999*time.Microsecond, time.Nanosecond })},
		{"negative margin", with(func(c *Config) { c.FenceMargin = -time.Second })},
		{"margin equal to TTL", with(func(c *Config) { c.FenceMargin = DefaultTTL })},
		{"stale between beats", with(func(c *Config) { c.FenceMargin = 8 * time.Second })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(rdb, tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New() = %v, %v; want an error wrapping ErrInvalidConfig", p, err)
			}
		})
	}
	t.Run("nil client", func(t *testing.T) {
		if _, err := New(nil, ok); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New(nil) error = %v, want ErrInvalidConfig", err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		p, err := New(rdb, ok)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Config()
		if got.Beat != DefaultBeat || got.TTL != DefaultTTL || got.FenceMargin != DefaultBeat ||
			got.Clock == nil || got.Logger == nil {
			t.Errorf("defaults not applied: %+v", got)
		}
		if !p.stale() || !p.lastBeat().IsZero() {
			t.Errorf("new Presence: stale() = %v, lastBeat() = %v; want stale, zero", p.stale(), p.lastBeat())
		}
	})
}
