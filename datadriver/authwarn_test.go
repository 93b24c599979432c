package datadriver_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/testsupport"
)

// unauthenticatedWarning opens the line a Node without RequestKey logs.
const unauthenticatedWarning = "handoff requests are not authenticated"

// unauthChildEnv marks the child process of TestUnauthenticatedWarnOncePerProcess.
const unauthChildEnv = "PLAYERDATA_UNAUTH_WARN_CHILD"

// A process says once, in one line, that its handoff requests are not
// authenticated, however many Nodes without RequestKey it starts. The
// warning is per process, so the test runs in a fresh one: this test
// binary, started again to run only the child half.
func TestUnauthenticatedWarnOncePerProcess(t *testing.T) {
	if os.Getenv(unauthChildEnv) == "1" {
		unauthenticatedChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnauthenticatedWarnOncePerProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), unauthChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var warned, lines int
	if _, err := fmt.Sscanf(childLine(string(out)), "warned %d lines %d", &warned, &lines); err != nil {
		t.Fatalf("child's answer: %v\n%s", err, out)
	}
	if warned != 1 || lines != 1 {
		t.Errorf("two Nodes without RequestKey in one process: %d warnings in %d lines, want 1 warning in 1 line\n%s",
			warned, lines, out)
	}
}

// unauthenticatedChild starts two Nodes without RequestKey and prints how
// many times their logs say the requests are not authenticated, and in how
// many lines.
func unauthenticatedChild(t *testing.T) {
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	a := newServer(t, r, "server-a", fast, withNATS(t, n))
	b := newServer(t, r, "server-b", fast, withNATS(t, n))
	var warned, lines int
	for _, s := range []*server{a, b} {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(line, "not authenticated") {
				lines++
				if strings.Contains(line, "level=WARN") && strings.Contains(line, unauthenticatedWarning) {
					warned++
				}
			}
		}
	}
	fmt.Printf("CHILD: warned %d lines %d\n", warned, lines)
}

// childLine is what follows "CHILD: " in out.
func childLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "CHILD: "); ok {
			return rest
		}
	}
	return ""
}
