package names

import (
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/defaults"
)

func TestKey(t *testing.T) {
	for _, k := range []string{"", strings.Repeat("k", defaults.MaxKeyBytes+1), "a\x00b", "tab\there", "\xff"} {
		if Key(k) == nil {
			t.Errorf("Key(%q) = nil, want a refusal", k)
		}
	}
	for _, k := range []string{"user:42", "ユーザー:1", strings.Repeat("k", defaults.MaxKeyBytes)} {
		if err := Key(k); err != nil {
			t.Errorf("Key(%q) = %v, want nil", k, err)
		}
	}
}

func TestDriver(t *testing.T) {
	for name, want := range map[string]string{
		"":             "required",
		"Player Data":  "a space",
		"Player.Data":  "a dot",
		"Player{Data}": "a brace",
		"Player>":      "a NATS wildcard",
		"Pl\xffayer":   "invalid UTF-8",
		strings.Repeat("n", defaults.MaxNameBytes+1): "more than 128",
	} {
		err := Driver(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Driver(%q) = %v, want an error saying %q", name, err, want)
		}
	}
	if err := Driver("player_data-2"); err != nil {
		t.Errorf("Driver(player_data-2) = %v", err)
	}
}
