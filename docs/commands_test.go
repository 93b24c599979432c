package docs

// Every command the README and docs/ show is run, as CI runs the
// quickstart, so that a page cannot show a command or a flag that does not
// exist, or an answer the program no longer gives.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// docCommand is one command a page shows.
type docCommand struct {
	where string   // "docs/cli.md:20"
	line  string   // as the page shows it, without "$ " and a trailing comment
	shown []string // the output the page shows under a "$ " line
}

var (
	// commandRE matches a line that runs the program: "playerdata …",
	// "go run ./cmd/playerdata …", "go run ./cmd/playerdata-bench …", after
	// optional VAR=value assignments.
	commandRE = regexp.MustCompile(`^(?:[A-Z_]+=\S+\s+)*(?:go run \./cmd/playerdata(?:-bench)?|playerdata(?:-bench)?)(?:\s|$)`)
	// inlineRunRE matches an inline code span that runs the program from a
	// checkout ("`go run ./cmd/playerdata bench`").
	inlineRunRE = regexp.MustCompile("`(go run \\./cmd/playerdata[^`]*)`")
	// assignRE matches a VAR=value word before a command.
	assignRE = regexp.MustCompile(`^[A-Z_]+=`)
)

// docCommands extracts the commands of README.md and docs/*.md: the lines
// of fenced code blocks that run the program (a "$ " prompt is dropped, and
// the lines after it up to the next prompt are its shown output), and the
// inline code spans that go run it.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := append([]string{"../README.md"}, files...)
	var out []docCommand
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p, "../")
		if rel == p {
			rel = "docs/" + p
		}
		out = append(out, pageCommands(rel, string(b))...)
	}
	return out
}

// pageCommands extracts the commands of one page (see docCommands).
func pageCommands(rel, text string) []docCommand {
	var out []docCommand
	inFence, prompt := false, false // prompt: the last command had a "$ "
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, fence) {
			inFence, prompt = !inFence, false
			continue
		}
		if !inFence {
			for _, m := range inlineRunRE.FindAllStringSubmatch(line, -1) {
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", rel, i+1), line: m[1]})
			}
			continue
		}
		cmd, hasPrompt := strings.CutPrefix(trimmed, "$ ")
		if commandRE.MatchString(cmd) {
			out = append(out, docCommand{where: fmt.Sprintf("%s:%d", rel, i+1), line: dropComment(cmd)})
			prompt = hasPrompt
			continue
		}
		if prompt && trimmed != "" && len(out) > 0 {
			out[len(out)-1].shown = append(out[len(out)-1].shown, trimmed)
		}
	}
	return out
}

// dropComment cuts a trailing shell comment ("  # …") outside quotes.
func dropComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && i > 0 && (line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// shellWords splits a command line as sh would for these pages: words
// separated by blanks, '…' taken literally, "…" with $VAR expanded, $VAR
// expanded outside quotes too (by expand).
func shellWords(line string, expand func(string) string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unclosed \" in %q", line)
			}
			cur.WriteString(os.Expand(line[i+1:i+1+end], expand))
			i, inWord = i+1+end, true
		case c == '$':
			j := i + 1
			for j < len(line) && (line[j] == '_' || line[j] >= 'A' && line[j] <= 'Z' || line[j] >= '0' && line[j] <= '9') {
				j++
			}
			cur.WriteString(expand(line[i+1 : j]))
			i, inWord = j-1, true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// runResult is what one command did.
type runResult struct {
	status int
	output string // stdout and stderr, interleaved
	took   time.Duration
}

// runner runs the commands of the pages against the test's servers.
type runner struct {
	root      string            // the repository root: the working directory of every command
	bin       map[string]string // "playerdata", "playerdata-bench" → built binary
	env       map[string]string // REDIS_URL, NATS_URL, and what a page's $VAR may name
	hosts     map[string]string // a page's example URL → the test's
	parseOnly map[string]string // a line too long to run whole → why (it runs with --help appended)
}

// command turns a page's line into the argv and environment to run.
func (r *runner) command(line string) (argv, env []string, err error) {
	for from, to := range r.hosts {
		line = strings.ReplaceAll(line, from, to)
	}
	words, err := shellWords(line, func(v string) string { return r.env[v] })
	if err != nil {
		return nil, nil, err
	}
	for len(words) > 0 && assignRE.MatchString(words[0]) {
		env = append(env, words[0])
		words = words[1:]
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run":
		name := strings.TrimPrefix(words[2], "./cmd/")
		if r.bin[name] == "" {
			return nil, nil, fmt.Errorf("go run %s: not a command of this repository", words[2])
		}
		words = append([]string{r.bin[name]}, words[3:]...)
	case len(words) >= 1 && r.bin[words[0]] != "":
		words[0] = r.bin[words[0]]
	default:
		return nil, nil, fmt.Errorf("%q: not a command of this repository", line)
	}
	return words, env, nil
}

// run runs argv from the repository root, within limit.
func (r *runner) run(t *testing.T, argv, env []string, limit time.Duration) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.root
	cmd.Env = os.Environ()
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	res := runResult{output: out.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.status = ee.ExitCode()
	case err != nil:
		t.Fatalf("%q: %v", argv, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%q did not end within %v:\n%s", argv, limit, res.output)
	}
	return res
}

// build builds cmd/name of the repository at root into dir.
func build(t *testing.T, root, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", path, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return path
}

// untilScanFigures is a shown line up to the figures of the page's own
// Redis ("(a scan of 12034 keys on 3 masters)"), which no other Redis
// reproduces.
func untilScanFigures(line string) string {
	if i := strings.LastIndex(line, " (a scan of "); i >= 0 {
		return line[:i]
	}
	return line
}
