package main

// playerdata repair: put right what another tool broke in a profile's
// record (a field that is not an integer, a lock without a holder or
// stamped ahead of the clock, a key of the wrong type), so that it loads and
// saves again. One script call (record.Repair); nothing stored is deleted.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

const repairUsage = `Usage: playerdata repair --driver NAME [flags] KEY

Puts right the fields of profile KEY's record that another tool broke, the
ones a join refuses with ErrCorruptRecord naming them, so that the record
loads and saves again. Nothing stored is deleted:
  - a key of the wrong type (the record, its inbox, history, refusal counts
    or dead letters) is renamed aside to <key>:corrupt:<ms>;
  - epoch not an integer: set to the Redis time in ms (above any epoch a
    record reaches, so the fencing token never goes back);
  - ver not an integer: one more than the newest kept version;
  - inbox.seq not an integer: the number of waiting and dead messages;
  - at, hist.at, released.ver not an integer: removed (the next write sets
    them);
  - a broken lock (no holder, a presence flag neither 1 nor 0, a stamp that
    is not a number or, without the presence flag, far ahead of the Redis
    clock): freed with --force only (it may be another tool's lock that a
    process still uses);
  - a record missing while its inbox or history remains (deleted or
    evicted): started over with --force (its next join gets Defaults; its
    history stays, so restore can bring a kept version back);
  - fmt, schema, schema.min: left alone (only the build that wrote the data
    knows them): set them by hand after checking.
The repair is one script call: all of it or none. Run it with --dry-run
first.

Flags:
  --driver NAME        the driver's Config.Name, e.g. PlayerData (required)
  --force              also free a broken lock and start a missing record over
  --dry-run            say what would change, change nothing
  --lock-skew D        the servers' LockSkew (default 60s)
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --json               print one JSON object

Exit status: 0 repaired (with --dry-run: would repair), or nothing to
repair; 1 something was left that needs --force or a human (it is listed),
or the call failed; 2 usage.
`

// repairReport is what repair did, and its --json output.
type repairReport struct {
	Namespace string       `json:"namespace"`
	Driver    string       `json:"driver"`
	Key       string       `json:"key"`
	RecordKey string       `json:"record_key"`
	DryRun    bool         `json:"dry_run,omitempty"`
	Changed   []repairLine `json:"changed"`
	Left      []repairLine `json:"left"`
}

// repairLine is one field (or key) and what was done or why it was left.
type repairLine struct {
	Field string `json:"field"`
	What  string `json:"what"`
}

// runRepair is "playerdata repair".
func runRepair(ctx context.Context, args []string, stdout, _ io.Writer) error {
	cmd := newCommand("repair", repairUsage)
	var (
		f             readFlags
		driver        string
		force, dryRun bool
		skew          time.Duration
	)
	f.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.BoolVar(&force, "force", false, "")
	cmd.fs.BoolVar(&dryRun, "dry-run", false, "")
	cmd.fs.DurationVar(&skew, "lock-skew", datadriver.DefaultLockSkew, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(pos) != 1:
		return cmd.mistake("one profile KEY, got %d", len(pos))
	case skew <= 0:
		return cmd.mistake("--lock-skew %v: want a positive duration", skew)
	}
	key := pos[0]
	r, err := f.openProfile(ctx, cmd, driver, key)
	if err != nil {
		return err
	}
	defer r.Close()
	rk := datadriver.RecordKey(r.ns, driver, key)
	res, err := record.Repair(ctx, r.rdb, rk, record.RepairArgs{DryRun: dryRun, Force: force, Skew: skew})
	if err != nil {
		return fmt.Errorf("repair %s (it may or may not have landed; inspect shows the record): %w", key, err)
	}
	rep := &repairReport{Namespace: r.ns, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun,
		Changed: lines(res.Changed), Left: lines(res.Left)}
	if err := emit(stdout, f.json, rep, func(w io.Writer, st style) { printRepair(w, st, rep) }); err != nil {
		return err
	}
	if len(rep.Left) > 0 {
		return fmt.Errorf("repair %s: %d %s left: %s: %s", key, len(rep.Left), plural(len(rep.Left), "field", "fields"),
			rep.Left[0].Field, rep.Left[0].What)
	}
	return nil
}

func lines(fs []record.CorruptField) []repairLine {
	out := make([]repairLine, len(fs))
	for i, f := range fs {
		out[i] = repairLine{Field: f.Field, What: f.Why}
	}
	return out
}

// printRepair prints a report for people.
func printRepair(w io.Writer, st style, r *repairReport) {
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	verb := "changed"
	if r.DryRun {
		verb = "would change"
	}
	for _, l := range r.Changed {
		fmt.Fprintf(w, "  %-12s %s: %s\n", st.bold(verb), l.Field, l.What)
	}
	for _, l := range r.Left {
		fmt.Fprintf(w, "  %-12s %s: %s\n", st.bold("left"), l.Field, l.What)
	}
	if len(r.Changed) == 0 && len(r.Left) == 0 {
		fmt.Fprintln(w, "  nothing to repair: every field the library computes with is as it writes it")
	}
}
