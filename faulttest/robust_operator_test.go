//go:build linux

package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The operator of a robustness run: from the first traffic to the last,
// under the run's fault, it runs the playerdata program's verbs that can
// free a lock (unlock; repair --force) on the run's keys, as real
// processes, and records each in the history. A verb that freed a lock is
// a free in the model: it ends the key's owner, so a library that let an
// operator free a live session's lock (or let that session play on) makes
// the history illegal.

// operatorEvery is the mean pause between two of the operator's verbs.
const operatorEvery = 400 * time.Millisecond

// robustOperator runs the verbs until halt.
type robustOperator struct {
	r    *robustRun
	hist *HistoryWriter
	rng  *rand.Rand
	stop chan struct{}
	wg   sync.WaitGroup

	mu           sync.Mutex
	verbs, freed int
	answers      map[string]int // the lock rule's answers, by name
}

// startOperator starts the operator of r, its choices from the run's seed.
func (r *robustRun) startOperator() *robustOperator {
	h, err := OpenHistory(filepath.Join(r.dir, "operator.jsonl"))
	if err != nil {
		r.t.Fatal(err)
	}
	o := &robustOperator{r: r, hist: h, rng: rand.New(rand.NewPCG(uint64(r.p.seed), 0x0fe4a70)), stop: make(chan struct{}),
		answers: make(map[string]int)}
	o.wg.Add(1)
	go o.loop()
	return o
}

// halt stops the operator, waits for its verb in flight, and returns how
// many verbs ran, how many freed a lock, and the lock rule's answers.
func (o *robustOperator) halt() (verbs, freed int, answers map[string]int) {
	close(o.stop)
	o.wg.Wait()
	if err := o.hist.Close(); err != nil {
		o.r.t.Errorf("operator history: %v", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.verbs, o.freed, o.answers
}

func (o *robustOperator) loop() {
	defer o.wg.Done()
	held := []string(nil)
	for n := 1; ; n++ {
		// Most often a key the faulted server holds, as an operator who sees
		// it stuck would pick (playerdata locks --job a), soon after; else
		// any key.
		every := operatorEvery
		if len(held) > 0 {
			every /= 4
		}
		select {
		case <-o.stop:
			return
		case <-time.After(time.Duration(o.rng.Int64N(int64(2 * every)))):
		}
		key := "r:" + strconv.Itoa(o.rng.IntN(robustKeys))
		if held = o.heldBy("a"); len(held) > 0 && o.rng.IntN(4) > 0 {
			key = held[o.rng.IntN(len(held))]
		}
		verb := "unlock"
		if o.rng.IntN(4) == 0 {
			verb = "repair"
		}
		o.run(n, verb, key)
	}
}

// run runs one verb on key and records it: a call line before, a return
// line after (ok: it freed the lock; fail: it did not; unknown: the
// program failed without saying).
func (o *robustOperator) run(n int, verb, key string) {
	op := fmt.Sprintf("operator-%d", n)
	o.hist.Write(HistLine{Op: op, Kind: KindFree, Key: key, Sess: "operator"})
	args := []string{verb, "--redis", o.r.in.operatorRedis, "--namespace", robustNamespace, "--presence-ttl", "1s",
		"--beat", "250ms", "--driver", driverName, "--json"}
	if verb == "repair" {
		args = append(args, "--force")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Getenv(cliEnv), append(args, key)...)
	cmd.Env = append(os.Environ(), "NATS_URL=")
	out, _ := cmd.Output()
	freed, known, answer := verbFreed(verb, out)
	ret := HistLine{Ret: true, Op: op, Out: OutFail}
	switch {
	case !known:
		ret.Out, ret.Err = OutUnknown, fmt.Sprintf("%s: no answer (exit %d)", verb, cmd.ProcessState.ExitCode())
	case freed:
		ret.Out = OutOK
	}
	o.hist.Write(ret)
	o.mu.Lock()
	o.verbs++
	if freed {
		o.freed++
	}
	o.answers[verb+":"+answer]++
	o.mu.Unlock()
}

// heldBy lists the keys job holds, from `playerdata locks --job job`.
func (o *robustOperator) heldBy(job string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, os.Getenv(cliEnv), "locks", "--redis", o.r.in.operatorRedis, "--namespace",
		robustNamespace, "--presence-ttl", "1s", "--driver", driverName, "--job", job, "--json").Output()
	var rep struct{ Locks []struct{ Key string } }
	_ = json.Unmarshal(out, &rep)
	keys := make([]string, 0, len(rep.Locks))
	for _, l := range rep.Locks {
		keys = append(keys, l.Key)
	}
	return keys
}

// verbFreed reads a verb's --json output: whether it freed the key's lock,
// whether the output says either way, and the outcome for the report
// (unlock's outcome and the lock rule's answer).
func verbFreed(verb string, out []byte) (freed, known bool, answer string) {
	if verb == "unlock" {
		var rep struct{ Outcome, Answer string }
		if json.Unmarshal(out, &rep) != nil || rep.Outcome == "" {
			return false, false, "no answer"
		}
		return rep.Outcome == "freed", true, strings.TrimSuffix(rep.Outcome+"/"+rep.Answer, "/")
	}
	var rep struct {
		Changed []struct{ Field, What string }
	}
	if json.Unmarshal(out, &rep) != nil {
		return false, false, "no answer"
	}
	for _, c := range rep.Changed {
		if c.Field == "lock.job" && strings.HasPrefix(c.What, "the lock is freed") {
			return true, true, "freed"
		}
	}
	return false, true, fmt.Sprintf("%d changed", len(rep.Changed))
}
