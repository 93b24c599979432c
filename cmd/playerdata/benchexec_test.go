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
