// Package clihint builds the `playerdata` commands that the library (in an
// ErrCorruptRecord's text) and the CLI (in inspect's verdict) print as
// hints, so that each works as printed: every flag the deployment sets apart
// from the CLI's defaults is given, and words are quoted for a POSIX shell
// where they need it. Only --redis is left to the operator's $REDIS_URL: a
// hint never prints a password.
package clihint

import (
	"strings"
	"time"
)

// Flags are the flags a hint gives; a zero value is left out (the CLI's
// default applies). Durations apply to the verbs that read them.
type Flags struct {
	Namespace, PresenceKey string
	// PresenceTTL is read by every operator verb; Beat, LockTTL and
	// LockSkew by repair and unlock (the lock rule's settings).
	PresenceTTL, Beat, LockTTL, LockSkew time.Duration
}

// Command is `playerdata <verb> [flags] --driver <driver> [extra] <key>`.
func Command(verb, driver, key string, f Flags, extra ...string) string {
	args := []string{"playerdata", verb}
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, Quote(v))
		}
	}
	add("--namespace", f.Namespace)
	add("--presence-key", f.PresenceKey)
	dur := func(flag string, d time.Duration) {
		if d != 0 {
			args = append(args, flag, d.String())
		}
	}
	dur("--presence-ttl", f.PresenceTTL)
	if verb == "repair" || verb == "unlock" {
		dur("--beat", f.Beat)
		dur("--lock-ttl", f.LockTTL)
		dur("--lock-skew", f.LockSkew)
	}
	args = append(args, "--driver", Quote(driver))
	args = append(args, extra...)
	if strings.HasPrefix(key, "-") {
		args = append(args, "--") // a key that reads as a flag
	}
	return strings.Join(append(args, Quote(key)), " ")
}

// Quote quotes s for a POSIX shell when it holds anything but letters,
// digits and -_.:,/@%+= (or is empty).
func Quote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:,/@%+=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
