package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// inlineCommandRE matches an inline code span that names a command of
	// the program, often with placeholders: "`playerdata send --driver NAME
	// [--nats URL] KEY BODY_JSON`".
	inlineCommandRE = regexp.MustCompile("`playerdata ([a-z]+)((?: [^`]*)?)`")
	// flagRE matches a long flag.
	flagRE = regexp.MustCompile(`(?:^|[\s\[(|])(--[a-z][a-z0-9-]*)`)
	// usageRE matches a command of the program's usage ("  playerdata locks …").
	usageRE = regexp.MustCompile(`(?m)^  playerdata ([a-z]+)\b`)
)

// inlineCommand is a command an inline code span names.
type inlineCommand struct {
	where, span, command string
	flags                []string
}

// inlineCommands extracts the inline spans that name a command of the
// program, outside code blocks (whose lines TestDocCommands runs).
func inlineCommands(t *testing.T) []inlineCommand {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []inlineCommand
	for _, p := range append([]string{"../README.md"}, files...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p, "../")
		if rel == p {
			rel = "docs/" + p
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), fence) {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range inlineCommandRE.FindAllStringSubmatch(line, -1) {
				c := inlineCommand{where: fmt.Sprintf("%s:%d", rel, i+1), span: m[0], command: m[1]}
				for _, f := range flagRE.FindAllStringSubmatch(m[2], -1) {
					c.flags = append(c.flags, f[1])
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// checkInlineCommands fails for an inline span that names a command the
// program does not have, or a flag that command's help does not list
// (playerdata-bench's for bench).
func checkInlineCommands(t *testing.T, pd, bench string) {
	help := func(argv ...string) string {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	commands := map[string]bool{}
	for _, m := range usageRE.FindAllStringSubmatch(help(pd, "help"), -1) {
		commands[m[1]] = true
	}
	helps := map[string]string{}
	spans := inlineCommands(t)
	for _, c := range spans {
		if !commands[c.command] {
			t.Errorf("%s: %s: playerdata has no command %q (its commands: %v)", c.where, c.span, c.command, commands)
			continue
		}
		if _, ok := helps[c.command]; !ok {
			if c.command == "bench" {
				helps[c.command] = help(bench, "--help")
			} else {
				helps[c.command] = help(pd, "help", c.command)
			}
		}
		for _, f := range c.flags {
			if !hasFlag(helps[c.command], f) {
				t.Errorf("%s: %s: playerdata %s has no flag %s", c.where, c.span, c.command, f)
			}
		}
	}
	t.Logf("%d inline commands checked against the program's help", len(spans))
}

// hasFlag reports whether help lists flag f: f not followed by a letter,
// digit or hyphen (--nats is not --nats-url).
func hasFlag(help, f string) bool {
	for rest := help; ; {
		i := strings.Index(rest, f)
		if i < 0 {
			return false
		}
		rest = rest[i+len(f):]
		if rest == "" || !strings.ContainsAny(rest[:1], "abcdefghijklmnopqrstuvwxyz0123456789-") {
			return true
		}
	}
}
