package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// Bounds of the process test, wide for a loaded 2-core machine: the lines
// come within a second or two, the drain within milliseconds.
const (
	seeWithin  = 60 * time.Second
	exitWithin = 30 * time.Second
)

// TestGameserverRuns builds the example and runs it as a user would: with
// no flags on its embedded servers, and with --redis and --nats on real
// ones. Players join, leave, come back with their saved data; the gift is
// sent and applied; SIGTERM drains and the process exits 0.
func TestGameserverRuns(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gameserver")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("no flags", func(t *testing.T) { // go run ./examples/gameserver: about 5 s to see it all
		t.Parallel()
		out := runUntilDrained(t, bin)
		if !strings.Contains(out, "Redis embedded miniredis") || !strings.Contains(out, "NATS embedded nats-server") {
			t.Errorf("without flags the server should say it runs on embedded servers:\n%s", out)
		}
	})
	t.Run("real servers", func(t *testing.T) {
		t.Parallel()
		r := testsupport.StartOwnRedis(t)
		n := testsupport.StartNATS(t)
		fast := []string{"--players", "2", "--every", "300ms", "--stay", "500ms"}
		out := runUntilDrained(t, bin, append(fast, "--redis", "redis://"+r.Addr, "--nats", n.URL,
			"--namespace", r.Namespace, "--job", "example-test")...)
		if strings.Contains(out, "embedded") {
			t.Errorf("with --redis and --nats the server should use them:\n%s", out)
		}
	})
}

// runUntilDrained starts bin with args, waits until it has shown what a
// user expects of a running server, sends SIGTERM, and checks the drain
// and the exit status. It returns stdout.
func runUntilDrained(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	out := newLines(pipe)

	running := []string{
		"player:1 joined: visit 1",
		"gift sent to player:1",
		`gift applied: +50 coins ("welcome back")`,
		"player:1 left: saved and released",
		"player:1 joined: visit 2", // the first visit's save came back
	}
	if err := out.await(running, seeWithin); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.text(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { out.wait(); exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(exitWithin):
		t.Fatalf("no exit within %s of SIGTERM\nstdout:\n%s", exitWithin, out.text())
	}
	text := out.text()
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v, want status 0\nstdout:\n%s\nstderr:\n%s", err, text, stderr.String())
	}
	for _, want := range []string{"SIGTERM: draining", "every profile saved and released; exiting"} {
		if !strings.Contains(text, want) {
			t.Errorf("stdout lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("the library logged an error on a clean run:\n%s", stderr.String())
	}
	return text
}

// lines collects a process's output lines as they come.
type lines struct {
	mu   sync.Mutex
	all  []string
	news chan struct{} // signalled on each line
	done chan struct{} // closed at EOF
}

func newLines(r io.Reader) *lines {
	l := &lines{news: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		s := bufio.NewScanner(r)
		for s.Scan() {
			l.mu.Lock()
			l.all = append(l.all, s.Text())
			l.mu.Unlock()
			select {
			case l.news <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// await returns once every one of want has appeared in some line, or an
// error naming those missing at the deadline or at EOF.
func (l *lines) await(want []string, within time.Duration) error {
	deadline := time.After(within)
	for {
		var missing []string
		text := l.text()
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-l.news:
		case <-l.done:
			return errors.New("the server exited before printing " + strings.Join(missing, "; "))
		case <-deadline:
			return errors.New("not printed within " + within.String() + ": " + strings.Join(missing, "; "))
		}
	}
}

// wait returns at EOF.
func (l *lines) wait() { <-l.done }

func TestParseFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"an argument":   {"extra"},
		"no players":    {"--players", "0"},
		"a zero period": {"--every", "0s"},
		"unknown flag":  {"--speed", "4"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if _, err := parseFlags(args, &stderr); !errors.Is(err, errUsage) || stderr.Len() == 0 {
				t.Errorf("parseFlags(%q) = %v (said %q), want errUsage and a message", args, err, stderr.String())
			}
		})
	}
	c, err := parseFlags(nil, io.Discard)
	if err != nil || c.redisURL != "" || c.natsURL != "" {
		t.Errorf("no flags: %+v, %v; want embedded servers (empty URLs)", c, err)
	}
}
