package clihint

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A hint names every flag given, quotes what a shell would split or
// expand, and keeps a key that reads as a flag a key; sh reads it back into
// the very words meant.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		verb  string
		key   string
		f     Flags
		extra []string
		want  string
	}{
		{"defaults", "repair", "user:42", Flags{}, nil, "playerdata repair --driver PlayerData user:42"},
		{"a namespace and the lock rule's settings", "repair", "user:42",
			Flags{Namespace: "mygame", PresenceTTL: time.Second, Beat: 250 * time.Millisecond, LockTTL: time.Minute},
			[]string{"--force"},
			"playerdata repair --namespace mygame --presence-ttl 1s --beat 250ms --lock-ttl 1m0s --driver PlayerData --force user:42"},
		{"inspect takes no lock rule", "inspect", "k", Flags{Beat: time.Second, PresenceKey: "P"}, nil,
			"playerdata inspect --presence-key P --driver PlayerData k"},
		{"a key with a space and a quote", "repair", "it's a key", Flags{Namespace: "my game"}, nil,
			`playerdata repair --namespace 'my game' --driver PlayerData 'it'\''s a key'`},
		{"a key that reads as a flag", "repair", "-x", Flags{}, nil, "playerdata repair --driver PlayerData -- -x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Command(tc.verb, "PlayerData", tc.key, tc.f, tc.extra...)
			if got != tc.want {
				t.Fatalf("Command = %s\nwant      %s", got, tc.want)
			}
			words, err := exec.Command("sh", "-c", "printf '%s\\n' "+strings.TrimPrefix(got, "playerdata ")).Output()
			if err != nil {
				t.Fatal(err)
			}
			if last := strings.Split(strings.TrimSuffix(string(words), "\n"), "\n"); last[len(last)-1] != tc.key {
				t.Fatalf("sh reads the key as %q, want %q", last[len(last)-1], tc.key)
			}
		})
	}
}
