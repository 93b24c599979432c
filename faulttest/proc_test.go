//go:build linux

package faulttest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/testsupport"
)

const (
	// driverName is the driver every gameserver of a scenario runs.
	driverName = "PlayerData"
	// pollEvery is how often waitFor re-checks a condition that no event
	// signals (one read from Redis, a clock deadline).
	pollEvery = 50 * time.Millisecond
	// exitWithin bounds the wait for a signalled process to exit.
	exitWithin = 20 * time.Second
	// logTail is how many lines of a gameserver's log a failure shows.
	logTail = 40
)

// timings are a gameserver's library timings; zero fields keep the
// library's defaults.
type timings struct {
	beat, ttl, margin time.Duration
	lockWait, repeat  time.Duration
	parkMin, parkMax  time.Duration
	saveTimeout       time.Duration
}

// shortTimings are the shortened timings of most scenarios: beat 250 ms,
// presence TTL 1 s (fence after 750 ms without an acknowledged beat).
func shortTimings() timings { return timings{beat: 250 * time.Millisecond, ttl: time.Second} }

// String describes the presence timings for a figure line.
func (tm timings) String() string {
	if tm.beat == 0 && tm.ttl == 0 {
		return "library defaults (beat 3 s, TTL 10 s)"
	}
	return fmt.Sprintf("beat %v, TTL %v", tm.beat, tm.ttl)
}

// cluster is the processes of one scenario: a Redis, the gameservers, and a
// client that reads ground truth straight from Redis.
type cluster struct {
	t     testing.TB
	redis *testsupport.Redis
	ns    string
	rdb   redis.UniversalClient // direct, for ground truth

	changed chan struct{} // one pending wake-up for waitFor

	mu      sync.Mutex
	servers []*server
}

// newCluster starts a cluster over r.
func newCluster(t testing.TB, r *testsupport.Redis) *cluster {
	t.Helper()
	if os.Getenv(binEnv) == "" {
		t.Fatalf("%s is not set (TestMain builds it)", binEnv)
	}
	return &cluster{
		t: t, redis: r, ns: r.Namespace,
		rdb:     r.Client(t, func(o *redis.Options) { o.MaxRetries = 5 }),
		changed: make(chan struct{}, 1),
	}
}

func (c *cluster) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds, re-checking it on every event and every
// pollEvery, and reports whether it did within `within`. cond runs on the
// test's goroutine.
func (c *cluster) waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-c.changed:
		case <-tick.C:
		}
	}
	return true
}

// mustWait is waitFor that fails the test when cond does not hold in time.
func (c *cluster) mustWait(within time.Duration, what string, cond func() bool) {
	c.t.Helper()
	if !c.waitFor(within, cond) {
		c.t.Fatalf("waited %v for %s", within, what)
	}
}

// gsOpts are one gameserver's flags.
type gsOpts struct {
	job          string
	redisAddr    string // "": the cluster's Redis
	natsURL      string
	first, count int
	concurrency  int           // 0: 64
	update, save time.Duration // 0: 100 ms, 1 s
	tm           timings
	redisTimeout time.Duration
	rejoin       time.Duration
	releaseDelay time.Duration
	logUpdates   bool
	messages     bool          // -messages: OnMessage applies Gift messages
	applyDelay   time.Duration // -apply-delay: OnMessage takes this long
	waitStart    bool          // -wait-start: join nothing until send("start")
}

func (o gsOpts) args(c *cluster) []string {
	addr := o.redisAddr
	if addr == "" {
		addr = c.redis.Addr
	}
	a := []string{"-redis", addr, "-job", o.job, "-ns", c.ns, "-driver", driverName,
		"-first", strconv.Itoa(o.first), "-count", strconv.Itoa(o.count)}
	if o.natsURL != "" {
		a = append(a, "-nats", o.natsURL)
	}
	if o.concurrency > 0 {
		a = append(a, "-concurrency", strconv.Itoa(o.concurrency))
	}
	if o.logUpdates {
		a = append(a, "-log-updates")
	}
	if o.messages {
		a = append(a, "-messages")
	}
	if o.waitStart {
		a = append(a, "-wait-start")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"-update", o.update}, {"-save", o.save}, {"-redis-timeout", o.redisTimeout},
		{"-rejoin", o.rejoin}, {"-release-delay", o.releaseDelay}, {"-apply-delay", o.applyDelay},
		{"-beat", o.tm.beat}, {"-ttl", o.tm.ttl}, {"-fence-margin", o.tm.margin},
		{"-lock-wait", o.tm.lockWait}, {"-request-repeat", o.tm.repeat},
		{"-park-min", o.tm.parkMin}, {"-park-max", o.tm.parkMax}, {"-save-timeout", o.tm.saveTimeout},
	} {
		if d.v > 0 {
			a = append(a, d.flag, d.v.String())
		}
	}
	return a
}

// keys are the keys a gameserver started with o plays.
func (o gsOpts) keys() []string { return keyRange(o.first, o.count) }

// keyRange is the gameserver's key naming: user:<first> … user:<first+count-1>.
func keyRange(first, count int) []string {
	keys := make([]string, count)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(first+i)
	}
	return keys
}

// server is one gameserver process and the events it printed.
type server struct {
	c      *cluster
	job    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	log    string        // its stderr
	exited chan struct{} // closed once stdout is drained and the process reaped

	mu     sync.Mutex
	evs    []Event
	counts map[string]int
	last   map[string]map[string]Event // kind → key → latest
	bad    []string                    // lines that were not events
}

// start starts a gameserver; it is killed (-9) when the test ends.
func (c *cluster) start(o gsOpts) *server {
	c.t.Helper()
	s := &server{
		c: c, job: o.job, exited: make(chan struct{}),
		counts: make(map[string]int), last: make(map[string]map[string]Event),
		log: filepath.Join(c.t.TempDir(), o.job+".log"),
	}
	logf, err := os.Create(s.log)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close() // the child has its own copy
	s.cmd = exec.Command(os.Getenv(binEnv), o.args(c)...)
	s.cmd.Stderr = logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		c.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		c.t.Fatalf("start gameserver %s: %v", o.job, err)
	}
	go s.read(stdout)
	c.t.Cleanup(func() {
		s.kill()
		if c.t.Failed() {
			c.t.Logf("gameserver %s log (last %d lines):\n%s", s.job, logTail, tail(s.log, logTail))
		}
	})
	c.mu.Lock()
	c.servers = append(c.servers, s)
	c.mu.Unlock()
	c.mustWait(10*time.Second, o.job+" ready", func() bool { return s.count(EvReady) > 0 || s.gone() })
	if s.gone() {
		c.t.Fatalf("gameserver %s exited at start; log:\n%s", o.job, tail(s.log, logTail))
	}
	return s
}

// read collects events until stdout closes, then reaps the process.
func (s *server) read(stdout io.Reader) {
	defer func() {
		_ = s.cmd.Wait()
		close(s.exited)
		s.c.signal()
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			s.mu.Lock()
			s.bad = append(s.bad, sc.Text())
			s.mu.Unlock()
			continue
		}
		s.add(e)
		s.c.signal()
	}
}

func (s *server) add(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, e)
	s.counts[e.Ev]++
	if e.Key != "" {
		m := s.last[e.Ev]
		if m == nil {
			m = make(map[string]Event)
			s.last[e.Ev] = m
		}
		m[e.Key] = e
	}
}

// count is how many events of kind the server printed.
func (s *server) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// keys is how many distinct keys have an event of kind.
func (s *server) keys(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.last[kind])
}

// keysSince is how many keys have an event of kind at or after t.
func (s *server) keysSince(kind string, t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.last[kind] {
		if e.T >= t.UnixNano() {
			n++
		}
	}
	return n
}

// latest is the last event of kind for key.
func (s *server) latest(kind, key string) (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.last[kind][key]
	return e, ok
}

// latestSince is the last event of kind for key when it is stamped at or
// after t.
func (s *server) latestSince(kind, key string, t time.Time) (Event, bool) {
	e, ok := s.latest(kind, key)
	if !ok || e.T < t.UnixNano() {
		return Event{}, false
	}
	return e, true
}

// events returns the server's events of the given kinds (all when none), in
// the order printed.
func (s *server) events(kinds ...string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.evs {
		if len(kinds) == 0 || containsStr(kinds, e.Ev) {
			out = append(out, e)
		}
	}
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// gone reports whether the process has exited.
func (s *server) gone() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until every event it printed is read and the
// process is reaped. A paused process dies too.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// pause sends SIGSTOP; resume sends SIGCONT.
func (s *server) pause() { s.sig(syscall.SIGSTOP) }

func (s *server) resume() { s.sig(syscall.SIGCONT) }

func (s *server) sig(sig syscall.Signal) {
	s.c.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.c.t.Fatalf("signal %v to %s: %v", sig, s.job, err)
	}
}

// terminate sends SIGTERM and waits for the exit; it returns the exit code.
func (s *server) terminate() int {
	s.c.t.Helper()
	s.sig(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(exitWithin):
		s.c.t.Fatalf("%s did not exit within %v of SIGTERM", s.job, exitWithin)
	}
	return s.cmd.ProcessState.ExitCode()
}

// send writes one command line to the server's stdin.
func (s *server) send(cmd string) {
	s.c.t.Helper()
	if _, err := io.WriteString(s.stdin, cmd+"\n"); err != nil {
		s.c.t.Fatalf("command %q to %s: %v", cmd, s.job, err)
	}
}

// dump asks for a dump and returns it.
func (s *server) dump() Event {
	s.c.t.Helper()
	n := s.count(EvDump)
	s.send("dump")
	s.c.mustWait(10*time.Second, s.job+"'s dump", func() bool { return s.count(EvDump) > n })
	d := s.events(EvDump)
	return d[len(d)-1]
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
