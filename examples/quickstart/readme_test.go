package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// readmeMarker is the line of README.md just above the code block that
// shows this program.
const readmeMarker = "<!-- quickstart: examples/quickstart/main.go -->"

// TestREADMEShowsThisFile: the README's complete main.go is this file, byte
// for byte, so what a reader copies is what CI builds.
func TestREADMEShowsThisFile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	block, err := codeBlockAfter(string(readme), readmeMarker)
	if err != nil {
		t.Fatal(err)
	}
	if block == string(src) {
		return
	}
	got, want := strings.Split(block, "\n"), strings.Split(string(src), "\n")
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("README.md's quickstart block differs from examples/quickstart/main.go at line %d:\nREADME:  %q\nmain.go: %q\n(copy main.go into the block)", i+1, g, w)
		}
	}
}

// codeBlockAfter returns the body of the fenced code block that starts on
// the line after marker (its text between the fences, with a final newline).
func codeBlockAfter(doc, marker string) (string, error) {
	_, rest, ok := strings.Cut(doc, marker+"\n")
	if !ok {
		return "", fmt.Errorf("README.md has no line %q", marker)
	}
	open, body, ok := strings.Cut(rest, "\n")
	if !ok || !strings.HasPrefix(open, "```") {
		return "", fmt.Errorf("the line after %q is not a code fence", marker)
	}
	body, _, ok = strings.Cut(body, "\n```\n")
	if !ok {
		return "", fmt.Errorf("the code block after %q is not closed", marker)
	}
	return body + "\n", nil
}
