package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// buildCLI builds this program into a directory of its own and returns
// that directory, for tests that run a command line as an operator would.
func buildCLI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "playerdata"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// shellRun runs line through sh, with the built program first on PATH and
// REDIS_URL set, as an operator pastes a hint.
func shellRun(t *testing.T, bin, redisURL, line string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), envRedis+"="+redisURL)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// hintIn is the command an error's text names between backticks.
func hintIn(t *testing.T, err error) string {
	t.Helper()
	m := regexp.MustCompile("`(playerdata [^`]*)`").FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no command in %q", err)
	}
	return m[1]
}

// A record another tool broke is refused by a join, whose error names the
// command that repairs it; that command, run exactly as printed (namespace
// included), repairs the record, and a broken lock keeps its holder: another
// tool's lock (no presence flag) stamped two days ahead is stamped with the
// Redis time, and moves only by age. The same command in another namespace
// finds no record and says so (status 2), never an all-clear.
func testRepairMakesABrokenRecordLoad(t *testing.T, e testEnv) {
	s := e.startServer(t, "server-a", serverOpts{})
	ctx := context.Background()
	rk := e.rk("PlayerData", "user:9")
	ahead := strconv.FormatInt(time.Now().Add(48*time.Hour).UnixMilli(), 10)
	e.putRecord(t, rk, "ver", "not-a-number", "epoch", "12", "lock.token", "t", "lock.job", "a-tool", "lock.at", ahead)
	_, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{})
	var ce *datadriver.CorruptRecordError
	if !errors.As(err, &ce) || ce.Path != "ver" {
		t.Fatalf("Load = %v, want ErrCorruptRecord naming ver", err)
	}
	hint := hintIn(t, err)
	if want := "playerdata repair --namespace " + e.ns + " --driver PlayerData user:9"; hint != want {
		t.Fatalf("hint %q, want %q", hint, want)
	}

	// inspect shows the broken ver as stored, and the verdict a join gets.
	r := runArgs(t, 10*time.Second, e.args("inspect", "--driver", "PlayerData", "user:9")...)
	out := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{`ver = "not-a-number"`, "a join is refused at once with ErrCorruptRecord naming ver"} {
		if r.err != nil || !strings.Contains(out, want) {
			t.Fatalf("inspect (%v) has no %q:\n%s", r.err, want, r.stdout)
		}
	}
	if strings.Contains(out, "takes the lock over") || strings.Contains(out, "ver 0,") {
		t.Fatalf("inspect shows the broken ver as 0 or a takeover:\n%s", r.stdout)
	}

	bin := buildCLI(t)
	// The hint in another namespace (as printed before it named one): no
	// record, status 2, never "nothing to repair".
	other := strings.Replace(hint, "--namespace "+e.ns, "--namespace "+e.ns+"-other", 1)
	if out, code := shellRun(t, bin, e.url, other); code != exitUsage || strings.Contains(out, "nothing to repair") {
		t.Fatalf("%s: status %d, want %d and no all-clear:\n%s", other, code, exitUsage, out)
	}
	if out, code := shellRun(t, bin, e.url, hint+" --dry-run"); code != exitOK || !strings.Contains(out, "would change") ||
		e.rdb.HGet(ctx, rk, "ver").Val() != "not-a-number" {
		t.Fatalf("dry run: status %d\n%s", code, out)
	}
	out, code := shellRun(t, bin, e.url, hint)
	if code != exitOK || !strings.Contains(out, "lock.at: set to") {
		t.Fatalf("%s: status %d\n%s", hint, code, out)
	}
	if f := e.rdb.HMGet(ctx, rk, "ver", "lock.token", "lock.job").Val(); f[0] != "1" || f[1] != "t" || f[2] != "a-tool" {
		t.Fatalf("record after the repair: ver, token, job = %v; want 1 and the tool's lock kept", f)
	}
	// The tool's lock is kept: a load meets it, and unlock frees it only by
	// age (LockTTL+LockSkew after the repair's stamp).
	var le *datadriver.LockedError
	if _, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{}); !errors.As(err, &le) || le.Holder != "a-tool" {
		t.Fatalf("Load after the repair = %v, want the tool's lock", err)
	}
	r = runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:9")...)
	if exitStatus(r.err) != exitFailed || !strings.Contains(r.err.Error(), "(try again in 3m59") {
		t.Fatalf("unlock of the fresh stamp = %v", r.err)
	}
	old := strconv.FormatInt(time.Now().Add(-5*time.Minute).UnixMilli(), 10)
	e.putRecord(t, rk, "lock.at", old) // as five minutes on
	if r := runArgs(t, 10*time.Second, e.args("unlock", "--driver", "PlayerData", "user:9")...); r.err != nil {
		t.Fatalf("unlock of an aged lock: %v", r.err)
	}
	p, err := s.players.Load(ctx, "user:9", datadriver.LoadOptions{})
	if err != nil {
		t.Fatalf("Load after the unlock: %v", err)
	}
	if p.Epoch() != 13 {
		t.Errorf("epoch %d after the repair, want 13: the fencing token never goes back", p.Epoch())
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
