package main

// playerdata demo: the four ways a player reaches server B while server A
// still holds their lock, played with two real Nodes over Redis and NATS.
// This file holds the command: its flags, the servers it runs on, the
// output. The cases themselves are in demo_cases.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/ckernel/playerdata/internal/labenv"
)

const demoUsage = `Usage: playerdata demo [flags]

Plays the four ways a player arrives on server B while server A still holds
their lock, each with two real Nodes ("A" and "B") and the real protocol:
stale-connection, failed-leave-save, crash, stalling-holder. Prints each
case's timeline and a summary; the crash and stalling cases play --speed
times faster (beat, presence TTL, request repeat, parking and LockWait all
divided by it), the two quick ones at real timings.

Without --redis / --nats it starts an embedded Redis (miniredis) and an
embedded NATS server in the process. With real ones, it works under a fresh
namespace "<prefix>-<random>" and deletes that namespace's keys at the end.

Flags:
  --redis URL        Redis to use (default $REDIS_URL; embedded when neither)
  --nats URL         NATS to use (default $NATS_URL; embedded when neither)
  --namespace PREFIX prefix of the run's fresh namespace (default "demo")
  --speed N          speed-up of the crash and stalling cases, 1 to 50 (default 10)
  --case NAME        play one case only
  --json             print one JSON array, one object per case
  -v                 also print every library log line on stderr
`

// Demo defaults.
const (
	defaultDemoSpeed = 10 // the crash and stalling cases in about 1.5 s each; the tests play at this speed too
	maxDemoSpeed     = 50 // beyond it the scaled timings fall to a few Redis round trips
	// closeTimeout bounds the closing of a case's servers and of the demo.
	closeTimeout = 5 * time.Second
)

// demoFlags are demo's flags.
type demoFlags struct {
	conn     connFlags
	speed    float64
	caseName string
	json     bool
	verbose  bool
}

// runDemo is "playerdata demo".
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("demo", demoUsage)
	var f demoFlags
	f.conn.addRedis(cmd.fs)
	f.conn.addNATS(cmd.fs)
	cmd.fs.Float64Var(&f.speed, "speed", defaultDemoSpeed, "")
	cmd.fs.StringVar(&f.caseName, "case", "", "")
	cmd.fs.BoolVar(&f.json, "json", false, "")
	cmd.fs.BoolVar(&f.verbose, "v", false, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmd.mistake("unexpected argument %q", pos[0])
	}
	if math.IsNaN(f.speed) || f.speed < 1 || f.speed > maxDemoSpeed {
		return cmd.mistake("--speed %v: want a number from 1 to %d", f.speed, maxDemoSpeed)
	}
	cases := demoCases()
	if f.caseName != "" {
		i := slices.IndexFunc(cases, func(c *caseDef) bool { return c.name == f.caseName })
		if i < 0 {
			return cmd.mistake("--case %q: want one of %s", f.caseName, strings.Join(caseNames(cases), ", "))
		}
		cases = cases[i : i+1]
	}
	prefix := f.conn.namespace
	if prefix == "" {
		prefix = "demo"
	}
	if err := jobid.Check(prefix); err != nil {
		return cmd.mistake("--namespace %q: %v", prefix, err)
	}
	f.conn.fromEnv()

	env, err := labenv.Start(ctx, labenv.Config{RedisURL: f.conn.redisURL, NATSURL: f.conn.natsURL, Prefix: prefix,
		Tool: "playerdata demo"})
	if err != nil {
		return err
	}
	defer env.Close()

	var raw io.Writer
	if f.verbose {
		raw = stderr
	}
	st := styleFor(stdout)
	if !f.json {
		printDemoHeader(stdout, st, env, f.speed, len(cases))
	}
	var results []caseResult
	once := &onceNotes{} // what the run says once, in the first case that meets it
	for i, def := range cases {
		res, err := playCase(ctx, env, def, f.speed, raw, once)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("case %s: interrupted", def.name)
			}
			return fmt.Errorf("case %s: %w", def.name, err)
		}
		results = append(results, res)
		if !f.json {
			printCase(stdout, st, i+1, len(cases), def, res)
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		printSummary(stdout, st, results)
	}
	return checkResults(cases, results)
}

// checkResults fails the demo when a case did not end as the design says:
// another outcome, or B without A's latest landed save.
func checkResults(cases []*caseDef, results []caseResult) error {
	var errs []error
	for i, r := range results {
		if r.Outcome != cases[i].expect {
			errs = append(errs, fmt.Errorf("case %s: B's join %s, the design says %s", r.Case, r.Outcome, cases[i].expect))
		}
		if !r.DataOK {
			errs = append(errs, fmt.Errorf("case %s: the data check failed", r.Case))
		}
	}
	return errors.Join(errs...)
}

// caseResult is one case's outcome, as --json prints it.
type caseResult struct {
	Case          string      `json:"case"`
	Outcome       string      `json:"outcome"`        // "loaded" or "refused"
	WaitMS        float64     `json:"wait_ms"`        // wall time from B's Join call to its result
	Speed         float64     `json:"speed"`          // how much faster than the real timings the case ran
	ScaledWaitMS  float64     `json:"scaled_wait_ms"` // WaitMS × Speed: the wait at real timings
	DataOK        bool        `json:"data_ok"`        // B got A's latest landed save (refused: the record still holds A's data and lock)
	Promise       string      `json:"promise"`        // what the reference design promises
	WithinPromise bool        `json:"within_promise"` // the scaled wait keeps the promise
	Error         string      `json:"error,omitempty"`
	Timeline      []eventJSON `json:"timeline"`

	events   []event
	settings string
}

// printDemoHeader says where the demo runs and at what speed.
func printDemoHeader(w io.Writer, st style, env *labenv.Env, speed float64, n int) {
	fmt.Fprintln(w, st.bold("playerdata demo")+": a player reaches server B while server A still holds their lock")
	fmt.Fprintf(w, "  Redis      %s\n", env.RedisDesc)
	fmt.Fprintf(w, "  NATS       %s\n", env.NATSDesc)
	cleanup := "its keys are deleted at the end"
	if env.Embedded {
		cleanup = "the embedded servers stop at the end"
	}
	fmt.Fprintf(w, "  namespace  %s (fresh for this run, each case under %s:<case>; %s)\n", env.Namespace, env.Namespace, cleanup)
	fmt.Fprintf(w, "  speed      crash and stalling-holder play %s times faster than the real timings; the quick cases at speed 1\n",
		fmtSpeed(speed))
	if n > 1 {
		fmt.Fprintf(w, "  %d cases; times are ms since each case started\n", n)
	}
}

// printCase prints one case: what happens, its settings, its timeline and
// its outcome.
func printCase(w io.Writer, st style, i, n int, def *caseDef, r caseResult) {
	fmt.Fprintf(w, "\n%s %s\n", st.bold(fmt.Sprintf("[%d/%d] %s", i, n, def.name)), "— "+def.title)
	fmt.Fprintf(w, "  %s\n", st.dim(r.settings))
	render(w, r.events, st)
	out := st.green(r.Outcome)
	if r.Outcome != def.expect {
		out = st.red(r.Outcome + " (the design says " + def.expect + ")")
	}
	fmt.Fprintf(w, "  → B's join %s after %s", out, human(time.Duration(r.WaitMS*float64(time.Millisecond))))
	if r.Speed != 1 {
		fmt.Fprintf(w, " (%s at real timings)", human(time.Duration(r.ScaledWaitMS*float64(time.Millisecond))))
	}
	fmt.Fprintf(w, "; the design promises %s\n", def.promise)
}

// printSummary prints the table of every case.
func printSummary(w io.Writer, st style, results []caseResult) {
	head := []string{"case", "outcome", "wait", "at real timings", "reference design promises", "promise kept", "B got A's latest save"}
	rows := [][]string{}
	for _, r := range results {
		data := "no"
		switch {
		case r.DataOK && r.Outcome == "refused":
			data = "refused: the record keeps A's lock and last save"
		case r.DataOK:
			data = "yes"
		}
		scaled := human(time.Duration(r.ScaledWaitMS * float64(time.Millisecond)))
		if r.Speed != 1 {
			scaled += " (×" + fmtSpeed(r.Speed) + ")"
		}
		kept := "yes"
		if !r.WithinPromise {
			kept = "no"
		}
		rows = append(rows, []string{r.Case, r.Outcome, human(time.Duration(r.WaitMS * float64(time.Millisecond))),
			scaled, r.Promise, kept, data})
	}
	width := make([]int, len(head))
	for _, row := range append([][]string{head}, rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	pad := func(s string, i int) string { return s + strings.Repeat(" ", width[i]-len([]rune(s))) }
	fmt.Fprintf(w, "\n%s\n", st.bold("Summary"))
	var line []string
	for i, h := range head {
		line = append(line, st.bold(pad(h, i)))
	}
	fmt.Fprintln(w, "  "+strings.TrimRight(strings.Join(line, "  "), " "))
	for _, row := range rows {
		line = line[:0]
		for i, c := range row {
			cell := pad(c, i)
			switch {
			case i == 1 && c == outcomeLoaded, (i == 5 || i == 6) && strings.HasPrefix(c, "yes"):
				cell = st.green(cell)
			case i == 1:
				cell = st.yellow(cell)
			case (i == 5 || i == 6) && c == "no":
				cell = st.red(cell)
			}
			line = append(line, cell)
		}
		fmt.Fprintln(w, "  "+strings.TrimRight(strings.Join(line, "  "), " "))
	}
}

// fmtSpeed prints a speed without needless decimals: "4", "2.5".
func fmtSpeed(s float64) string { return fmt.Sprintf("%g", s) }

// caseNames lists the names of cases.
func caseNames(cases []*caseDef) []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}
