// Package docs holds the pages the README links to. Its tests check that
// the pages hold together: every relative link in README.md and docs/*.md
// resolves (the file exists; an #anchor names a heading of that page), no
// link leaves the repository, and every page and chart is reachable from
// the README; and every command they show runs and ends as they say
// (TestDocCommands, commands_run_test.go).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines keeps the README a front door: depth goes to these pages.
const readmeMaxLines = 400

// page is one markdown file: its links and the anchors of its headings.
type page struct {
	path    string // relative to the repository root, slash-separated
	links   []link
	anchors map[string]bool
}

type link struct {
	line   int
	target string
}

var (
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeRE = regexp.MustCompile("`[^`]*`")
	fence  = "```"
)

// parse reads the markdown file at root/rel: links outside code, and
// GitHub's anchors of its headings (outside code fences).
func parse(t *testing.T, root, rel string) *page {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	p := &page{path: rel, anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), fence) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if h, ok := heading(line); ok {
			a := slug(h)
			if n := seen[a]; n > 0 {
				p.anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, link{line: i + 1, target: m[1]})
		}
	}
	return p
}

// heading returns the text of an ATX heading line ("## Text").
func heading(line string) (string, bool) {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	if level == 0 || level > 6 || len(line) == level || line[level] != ' ' {
		return "", false
	}
	return strings.TrimSpace(line[level:]), true
}

// slug is GitHub's anchor of a heading: lower case, every character but
// letters, digits, spaces, hyphens and underscores dropped, spaces turned
// into hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// pages parses README.md and every docs/*.md.
func pages(t *testing.T) (root string, ps map[string]*page) {
	t.Helper()
	root = ".."
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	ps = map[string]*page{"README.md": parse(t, root, "README.md")}
	for _, f := range files {
		rel := "docs/" + f
		ps[rel] = parse(t, root, rel)
	}
	return root, ps
}

// resolve returns the repository-relative path and the anchor a link from
// page p names; external is set for a URL.
func resolve(p *page, target string) (path, anchor string, external bool) {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return "", "", true
	}
	path, anchor, _ = strings.Cut(target, "#")
	if path == "" {
		return p.path, anchor, false
	}
	return filepath.ToSlash(filepath.Join(filepath.Dir(p.path), path)), anchor, false
}

func TestLinksResolve(t *testing.T) {
	root, ps := pages(t)
	for _, p := range ps {
		for _, l := range p.links {
			path, anchor, external := resolve(p, l.target)
			switch {
			case external:
				continue
			case strings.HasPrefix(l.target, "/") || path == ".." || strings.HasPrefix(path, "../"):
				t.Errorf("%s:%d: %s points outside the repository", p.path, l.line, l.target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
				t.Errorf("%s:%d: %s: no such file %s", p.path, l.line, l.target, path)
				continue
			}
			if anchor == "" {
				continue
			}
			target, ok := ps[path]
			if !ok {
				if strings.HasSuffix(path, ".md") {
					target = parse(t, root, path)
				} else {
					t.Errorf("%s:%d: %s: an anchor into a file that is not a page", p.path, l.line, l.target)
					continue
				}
			}
			if !target.anchors[anchor] {
				t.Errorf("%s:%d: %s: %s has no heading with anchor #%s", p.path, l.line, l.target, path, anchor)
			}
		}
	}
}

// TestEverythingReachable: every page of docs/ and every chart under
// docs/bench is reachable from the README by following links, so nothing
// the README once showed is lost in the split.
func TestEverythingReachable(t *testing.T) {
	_, ps := pages(t)
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		p := ps[queue[0]]
		queue = queue[1:]
		if p == nil {
			continue
		}
		for _, l := range p.links {
			path, _, external := resolve(p, l.target)
			if external || reached[path] {
				continue
			}
			reached[path] = true
			queue = append(queue, path)
		}
	}
	want, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	charts, err := filepath.Glob("bench/*.svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(want, charts...) {
		if rel := "docs/" + filepath.ToSlash(f); !reached[rel] {
			t.Errorf("%s is not reachable from README.md", rel)
		}
	}
	if len(charts) == 0 {
		t.Error("no charts under docs/bench")
	}
}

func TestREADMEIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the depth into a page of docs/", n, readmeMaxLines)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"The operator's CLI":                               "the-operators-cli",
		"Faults we test (real processes)":                  "faults-we-test-real-processes",
		"When `Send` fails: did it land, and how to retry": "when-send-fails-did-it-land-and-how-to-retry",
		`What "inbox N waits" means`:                       "what-inbox-n-waits-means",
		"Testing on virtual time, and the simulation":      "testing-on-virtual-time-and-the-simulation",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
