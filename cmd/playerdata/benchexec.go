package main

// playerdata bench: a thin exec of playerdata-bench, the lab's own
// command, so that the binary an operator runs links neither the charts'
// plotting nor the baselines' lock library.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// benchCommand is the lab's command that playerdata bench runs.
const benchCommand = "playerdata-bench"

const benchUsage = `Usage: playerdata bench [flags]

Runs playerdata-bench with the same flags and exit status: it measures the
library beside baselines measured in the same run (session cycle against raw
go-redis and redsync, handoff, crash takeover, presence, memory, messages).
It is a command of its own so that this binary, which operators run, links
no plotting nor benchmark baselines. It is looked for next to this program,
then on PATH; get it with

  go install github.com/ckernel/playerdata/cmd/playerdata-bench@latest

or, from a checkout, run it as "go run ./cmd/playerdata-bench [flags]".
Its flags: playerdata-bench --help.

Exit status: playerdata-bench's own (0 measured, 1 failed, 2 usage); 1 when
playerdata-bench cannot be found or started.
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
		if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
			fmt.Fprint(stdout, benchUsage)
			return nil
		}
		return err
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
		"go install github.com/ckernel/playerdata/cmd/%s@latest, or run go run ./cmd/%s from a checkout",
		benchCommand, benchCommand, benchCommand)
}
