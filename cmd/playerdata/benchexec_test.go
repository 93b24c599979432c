package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchRunsPlayerdataBench(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho \"args: $*\"\necho oops >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, benchCommand), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	r := runArgs(t, 10*time.Second, "bench", "--quick", "--json")
	if r.stdout != "args: --quick --json\n" || r.stderr != "oops\n" || exitStatus(r.err) != 3 {
		t.Fatalf("bench = %v (status %d), stdout %q, stderr %q; want playerdata-bench's own output and status 3",
			r.err, exitStatus(r.err), r.stdout, r.stderr)
	}

	t.Setenv("PATH", t.TempDir())
	r = runArgs(t, 10*time.Second, "bench", "--quick")
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "go install github.com/ckernel/playerdata/cmd/playerdata-bench@latest") {
		t.Fatalf("bench without playerdata-bench = %v", r.err)
	}
}

// From a checkout, with playerdata-bench neither beside nor on PATH,
// "go run ./cmd/playerdata bench" builds it from the checkout and runs it,
// saying so in one line; outside a checkout it says how to get it.
func TestBenchBuildsFromACheckout(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	// PATH as it is (go, and the C compiler the build cache was made with),
	// less any directory that holds a playerdata-bench.
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, benchCommand)); err != nil {
			keep = append(keep, d)
		}
	}
	t.Setenv("PATH", strings.Join(keep, string(os.PathListSeparator)))
	r := runArgs(t, 2*time.Minute, "bench", "--quick", "--help")
	if r.err != nil || !strings.Contains(r.stdout, "Usage: playerdata-bench") {
		t.Fatalf("bench --help from a checkout = %v, stdout %q, stderr %q; want playerdata-bench's help", r.err, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stderr, "\n"); n != 1 || !strings.Contains(r.stderr, "building it from this checkout") {
		t.Errorf("stderr %q: want one line saying it builds playerdata-bench from the checkout", r.stderr)
	}
	r = runArgs(t, 2*time.Minute, "bench", "--no-such-flag")
	if exitStatus(r.err) != 2 {
		t.Errorf("bench --no-such-flag from a checkout: status %d, want playerdata-bench's usage status 2", exitStatus(r.err))
	}

	t.Chdir(t.TempDir()) // not a checkout
	r = runArgs(t, 10*time.Second, "bench", "--quick")
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "go install github.com/ckernel/playerdata/cmd/playerdata-bench@latest") {
		t.Fatalf("bench outside a checkout = %v", r.err)
	}
}

// TestOperatorBinaryLinksNoLab checks that playerdata links neither the
// charts' plotting (gonum) nor the baselines' redsync: they are
// playerdata-bench's.
func TestOperatorBinaryLinksNoLab(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "gonum") || strings.Contains(dep, "redsync") || strings.HasSuffix(dep, "/internal/bench") {
			t.Errorf("playerdata links %s", dep)
		}
	}
}
