//go:build linux

package faulttest

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// plan is one robustness run: a fault, the seed of the traffic's choices,
// and the schedule. A failing run is replayed from its plan.
type plan struct {
	fault   string
	seed    int64
	warmup  time.Duration // traffic before the fault
	hold    time.Duration // how long the fault lasts (where it lasts)
	recover time.Duration // traffic after the fault ends
	limit   time.Duration // porcupine's time limit per key
}

// String is the plan as a replay names it.
func (p plan) String() string {
	return fmt.Sprintf("fault %s, seed %d, warm-up %v, fault %v, recovery %v", p.fault, p.seed, p.warmup, p.hold, p.recover)
}

const (
	// robustServers, robustWorkers and robustKeys shape the traffic: more
	// workers than keys, so that most joins take a key from another server.
	robustServers = 3
	robustWorkers = 3
	robustKeys    = 4
	// minOpsPerSecond is the rate of operations with an effect the servers
	// must reach before the fault: a run that did nothing fails.
	minOpsPerSecond = 20
	// robustNamespace is the key namespace of every run (each run has a
	// Redis of its own).
	robustNamespace = "robust"
)

// robustJobs are the servers' JobIDs.
var robustJobs = []string{"a", "b", "c"}

// runResult is what a run measured, for the report.
type runResult struct {
	ops, unknown, dropped int
	endedAdoptions        []string
	failedUpdatesKept     []string
	rate                  float64        // operations with an effect per second before the fault
	handoffs              int            // library releases that landed before the fault
	verbs, freed          int            // the operator's verbs, and of them those that freed a lock
	answers               map[string]int // the operator's outcomes, by verb
	takeovers             int            // keys taken from a session that had not released them
	verdict               verdict
}

// robustRun is one run in progress: its infrastructure, its servers and
// the directory of their histories.
type robustRun struct {
	t       *testing.T
	p       plan
	in      *infra
	dir     string
	servers map[string]*trafficServer
}

// runRobustness runs p and checks its history; it fails t when the history
// is not linearizable, when the check ran out of time, or when the traffic
// was too slow to mean anything.
func runRobustness(t *testing.T, p plan) runResult {
	r := &robustRun{t: t, p: p, dir: t.TempDir(), servers: map[string]*trafficServer{}}
	r.in = faultInfra(t, p)
	t.Logf("robustness: %s; network: %s; histories in %s", p, r.in.variant, r.dir)
	started := MonoNow()
	for _, j := range robustJobs {
		r.servers[j] = r.start(j, 1)
	}
	op := r.startOperator()
	time.Sleep(p.warmup)
	faultAt := MonoNow()
	applyFault(r)
	time.Sleep(p.recover)
	verbs, freed, answers := op.halt()
	for _, s := range r.servers {
		s.stop(t)
	}
	h, err := readHistories(r.dir)
	if err != nil {
		t.Fatalf("read histories: %v", err)
	}
	res := runResult{ops: h.ops(), unknown: h.unknown, dropped: h.dropped, handoffs: h.landedLibReleases(started, faultAt),
		endedAdoptions: h.endedAdoptions, takeovers: h.takeovers(), failedUpdatesKept: h.failedUpdatesKept(),
		verbs: verbs, freed: freed, answers: answers}
	window := time.Duration(faultAt - started - int64(time.Second))
	res.rate = float64(h.okBetween(started+int64(time.Second), faultAt)) / window.Seconds()
	res.verdict = check(h, p.limit)
	r.report(h, res)
	return res
}

// report logs the run's figures and fails the test on a bad verdict or a
// run too slow to mean anything, leaving the evidence where it says.
func (r *robustRun) report(h history, res runResult) {
	t, v := r.t, res.verdict
	var findings []string
	for _, e := range res.failedUpdatesKept {
		findings = append(findings, "FINDING under "+r.p.fault+": "+e)
	}
	for _, e := range h.endedAdoptions {
		findings = append(findings, "FINDING under "+r.p.fault+": a Join adopted a retained profile that had ended already: "+e)
	}
	t.Logf("ROBUST | %s | %s | %d ops checked (%d of unknown outcome, %d failed left out) | %.0f ops/s before the fault, %d handoffs, %d takeovers, %d moves | operator: %d verbs, %d freed a lock %v | %s | %v |",
		r.p.fault, r.in.variant, res.ops, res.unknown, res.dropped, res.rate, res.handoffs, res.takeovers, h.landedMoves(), res.verbs,
		res.freed, res.answers, v.result, v.took.Round(time.Millisecond))
	for _, f := range findings {
		t.Log(f)
	}
	if res.rate < minOpsPerSecond || res.handoffs == 0 {
		t.Errorf("traffic too slow to mean anything: %.0f operations/s before the fault (want %d), %d handoffs (want some)",
			res.rate, minOpsPerSecond, res.handoffs)
	}
	report := t.Errorf
	switch v.result {
	case porcupine.Ok:
		r.checkMutations(h)
		if os.Getenv("PLAYERDATA_ROBUST_KEEP") != "" {
			out := failureDir(t)
			if _, err := writeFailure(out, r.dir, v); err != nil {
				t.Errorf("keep the histories in %s: %v", out, err)
			}
			t.Logf("robustness: histories kept in %s", out)
		}
		return
	case porcupine.Unknown:
		t.Errorf("porcupine ran out of time (%v per key) on keys %v", r.p.limit, v.unknown)
	case porcupine.Illegal:
		for _, kv := range v.illegal {
			report("NOT LINEARIZABLE under %s: %s", r.p.fault, kv)
		}
	}
	out := failureDir(t)
	files, err := writeFailure(out, r.dir, v)
	if err == nil && len(findings) > 0 {
		err = os.WriteFile(filepath.Join(out, "findings.txt"), []byte(strings.Join(findings, "\n")+"\n"), 0o644)
	}
	if err != nil {
		t.Logf("write the failure's evidence to %s: %v", out, err)
	}
	report("evidence in %s (histories, explanations, visualizations %v); replay: %s", out, files, r.p)
}

// checkMutations asks the checker to find each mutation of this run's
// history illegal (wherever the history has a place for it): a checker that
// passes everything would fail here.
func (r *robustRun) checkMutations(h history) {
	var got []string
	for _, m := range mutations {
		caught, applied := mutationsCaught(h, m)
		got = append(got, fmt.Sprintf("%d/%d", caught, applied))
		if caught < applied {
			r.t.Errorf("the checker found only %d of %d keys illegal after %s", caught, applied, m.name)
		}
	}
	r.t.Logf("robustness: mutated histories found illegal (per mutation, keys caught/mutated): %v", got)
}

// failureDir is where a failing run's evidence goes (and with
// PLAYERDATA_ROBUST_KEEP set, any run's histories): under
// $PLAYERDATA_ROBUST_OUT when set, else a new directory in os.TempDir()
// that outlives the test.
func failureDir(t *testing.T) string {
	base := os.Getenv("PLAYERDATA_ROBUST_OUT")
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if base != "" {
		return filepath.Join(base, name+"-"+strconv.FormatInt(time.Now().Unix(), 10))
	}
	dir, err := os.MkdirTemp("", "playerdata-robust-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// landedLibReleases counts library releases that landed between from and
// to: keys that changed hands by handoff.
func (h history) landedLibReleases(from, to int64) int {
	n := 0
	for _, ops := range h.keys {
		for _, op := range ops {
			if in := op.Input.(opIn); in.Kind == KindLibRelease && !in.Unknown && op.Return >= from && op.Return <= to {
				n++
			}
		}
	}
	return n
}

// takeovers counts acquires that took a key from a session that had not
// released it (in return order): keys moved by a proof that the holder
// stopped, or lost by a fault, rather than handed off.
func (h history) takeovers() int {
	n := 0
	for _, ops := range h.keys {
		sorted := slices.Clone(ops)
		slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		owner, released := "", true
		for _, op := range sorted {
			in := inOf(op)
			switch {
			case !returned(op):
			case in.Kind == KindAcquire && !in.Adopt:
				if !released && owner != in.Sess {
					n++
				}
				owner, released = in.Sess, false
			case (in.Kind == KindRelease || in.Kind == KindLibRelease || in.Kind == KindMove) && in.Sess == owner:
				released = true
			}
		}
	}
	return n
}

// trafficServer is one gameserver process in traffic mode.
type trafficServer struct {
	job    string
	cmd    *exec.Cmd
	ready  chan struct{}
	exited chan struct{}
	log    string
}

// start starts instance n of the server job (a restart is instance 2),
// returns once it is ready, and kills it when the test ends.
func (r *robustRun) start(job string, n int) *trafficServer {
	t := r.t
	t.Helper()
	args := []string{"-traffic", "-history", filepath.Join(r.dir, fmt.Sprintf("%s-%d.jsonl", job, n)),
		"-job", job, "-ns", robustNamespace, "-driver", driverName, "-prefix", "r:", "-count", strconv.Itoa(robustKeys),
		"-workers", strconv.Itoa(robustWorkers), "-seed", strconv.FormatInt(r.p.seed*10+int64(n), 10),
		"-beat", "250ms", "-ttl", "1s", "-lock-wait", "2s", "-redis-timeout", "300ms", "-save-timeout", "1s",
		"-nats", r.in.natsURL(job), "-log-level", "WARN", "-move-to", otherJobs(job)}
	if r.p.fault == faultLostCommit && job == "a" {
		args = append(args, "-lost-commit-fault")
	}
	if r.in.sentinels != "" {
		args = append(args, "-sentinels", r.in.sentinels, "-master", r.in.master, "-min-replicas", strconv.Itoa(r.in.minReplicas))
	} else {
		args = append(args, "-redis", r.in.redisAddr(job))
	}
	s := &trafficServer{job: job, ready: make(chan struct{}), exited: make(chan struct{}),
		log: filepath.Join(r.dir, fmt.Sprintf("%s-%d.log", job, n))}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = r.in.command(job, os.Getenv(binEnv), args...)
	s.cmd.Stderr = logf
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start gameserver %s: %v", job, err)
	}
	go s.read(stdout)
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("gameserver %s (instance %d) log, last %d lines:\n%s", job, n, logTail, tail(s.log, logTail))
		}
	})
	select {
	case <-s.ready:
	case <-s.exited:
		t.Fatalf("gameserver %s exited at start; log:\n%s", job, tail(s.log, logTail))
	case <-time.After(20 * time.Second):
		t.Fatalf("gameserver %s not ready within 20 s; log:\n%s", job, tail(s.log, logTail))
	}
	return s
}

// read waits for the ready event, drains stdout, and reaps the process.
func (s *trafficServer) read(stdout io.Reader) {
	defer func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		var e Event
		if !ready && json.Unmarshal(sc.Bytes(), &e) == nil && e.Ev == EvReady {
			ready = true
			close(s.ready)
		}
	}
}

func (s *trafficServer) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, s.job, err)
	}
}

// kill sends SIGKILL (a stopped process dies too) and waits for the exit.
func (s *trafficServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop ends the server with SIGTERM (the Node closes, releasing its
// profiles: those releases are in the history too), or kills it after
// exitWithin.
func (s *trafficServer) stop(t *testing.T) {
	select {
	case <-s.exited:
		return
	default:
	}
	s.signal(t, syscall.SIGCONT)
	s.signal(t, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(exitWithin):
		t.Logf("gameserver %s did not exit within %v of SIGTERM; killed", s.job, exitWithin)
		s.kill()
	}
}

// otherJobs lists the robustness servers other than job, comma-separated:
// where its workers may move their sessions.
func otherJobs(job string) string {
	var out []string
	for _, j := range robustJobs {
		if j != job {
			out = append(out, j)
		}
	}
	return strings.Join(out, ",")
}

// landedMoves counts the moves (MoveTo) that landed: keys handed to a
// chosen server with their data.
func (h history) landedMoves() int {
	n := 0
	for _, ops := range h.keys {
		for _, op := range ops {
			if in := op.Input.(opIn); in.Kind == KindMove && !in.Unknown && returned(op) {
				n++
			}
		}
	}
	return n
}
