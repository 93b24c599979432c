package main

// playerdata bench: a thin exec of playerdata-bench, the lab's own
// command, so that the binary an operator runs links neither the charts'
// plotting nor the baselines' lock library.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// benchCommand is the lab's command that playerdata bench runs.
const benchCommand = "playerdata-bench"

// modulePath is this module's path: a go.mod naming it marks a checkout
// that can build benchCommand.
const modulePath = "github.com/ckernel/playerdata"

const benchUsage = `Usage: playerdata bench [flags]

Runs playerdata-bench with the same flags and exit status: it measures the
library beside baselines measured in the same run (session cycle against raw
go-redis and redsync, handoff, crash takeover, presence, memory, messages).
It is a command of its own so that this binary, which operators run, links
no plotting nor benchmark baselines. It is looked for next to this program,
then on PATH; get it with

  go install github.com/ckernel/playerdata/cmd/playerdata-bench@latest

When it is neither and the working directory is in a checkout of this
module ("go run ./cmd/playerdata bench"), it is built from that checkout
(go build ./cmd/playerdata-bench, into a temporary directory) and run.
Its flags: playerdata-bench --help.

Exit status: playerdata-bench's own (0 measured, 1 failed, 2 usage); 1 when
playerdata-bench cannot be found, built or started.
`

// childExit is the exit status of a command playerdata ran, which printed
// its own errors: main exits with it and prints nothing more.
type childExit struct{ code int }

func (e *childExit) Error() string {
	return fmt.Sprintf("%s exited with status %d", benchCommand, e.code)
}

// runBench is "playerdata bench": playerdata-bench with the same
// arguments, standard input and output.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	path, err := findBench()
	if err != nil {
		root, ok := checkoutRoot()
		if !ok {
			if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
				fmt.Fprint(stdout, benchUsage)
				return nil
			}
			return err
		}
		built, cleanup, berr := buildBench(ctx, root, stderr)
		if berr != nil {
			return fmt.Errorf("%w; building it from the checkout at %s failed: %w", err, root, berr)
		}
		defer cleanup()
		path = built
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &childExit{code: ee.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("bench: run %s: %w", path, err)
	}
	return nil
}

// findBench finds playerdata-bench beside this program, else on PATH.
func findBench() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), benchCommand)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(benchCommand); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("bench: %s is neither beside this program nor on PATH: install it with "+
		"go install %s/cmd/%s@latest, or run go run ./cmd/%s from a checkout",
		benchCommand, modulePath, benchCommand, benchCommand)
}

// checkoutRoot is the root of the checkout of this module that holds the
// working directory (the nearest go.mod above it names modulePath, and
// cmd/playerdata-bench is there), if it is in one.
func checkoutRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			mod := moduleLine(f)
			_ = f.Close()
			st, err := os.Stat(filepath.Join(dir, "cmd", benchCommand))
			return dir, mod == modulePath && err == nil && st.IsDir()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// moduleLine is the module path a go.mod declares, or "".
func moduleLine(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// buildBench builds cmd/playerdata-bench of the checkout at root into a
// temporary directory, saying so in one line on stderr, and returns its
// path and a function that removes it. The go command must be on PATH.
func buildBench(ctx context.Context, root string, stderr io.Writer) (path string, cleanup func(), err error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", nil, errors.New("the go command is not on PATH")
	}
	dir, err := os.MkdirTemp("", benchCommand+"-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, benchCommand)
	fmt.Fprintf(stderr, "playerdata: bench: %s is not installed; building it from this checkout (go build ./cmd/%s)\n",
		benchCommand, benchCommand)
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", path, "./cmd/"+benchCommand)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, stderr, stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build ./cmd/%s: %w", benchCommand, err)
	}
	return path, cleanup, nil
}
