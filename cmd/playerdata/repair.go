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

	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/record"
)

const repairUsage = `Usage: playerdata repair --driver NAME [flags] KEY

Puts right the fields of profile KEY's record that another tool broke, the
ones a join refuses with ErrCorruptRecord naming them, so that the record
loads and saves again. Nothing stored is deleted, and no lock changes hands
while its holder may live (the library's lock rule, internal/lockrule):
  - a key of the wrong type (the record, its inbox, history, refusal counts
    or dead letters) is renamed aside to <key>:corrupt:<ms>;
  - epoch not an integer: set to the Redis time in ms (above any epoch a
    record reaches, so the fencing token never goes back);
  - ver not an integer: one more than the newest kept version;
  - inbox.seq not an integer: the number of waiting and dead messages;
  - at, hist.at, released.ver not an integer: removed (the next write sets
    them);
  - lock.at not an integer, or (without the presence flag) far ahead of the
    Redis clock: set to the Redis time, the holder keeping its lock and
    token (a live holder goes on writing; its next save stamps it again);
  - lock.presence neither 1 nor 0: set to 1, the holder keeping its lock
    and token, once its presence was read (alive, stopped, or a missing
    beat that proves nothing yet; the lock then moves only when the holder
    releases it or is proven stopped); left when the read fails;
  - lock.job empty (a lock that names no holder): freed with --force only,
    and only once no live server can hold its token: every server in the
    presence hash either answered over NATS (--nats) that it holds no lock
    under that token (the holder releases it first, a save and a release,
    then answers), or is proven stopped (two reads a Beat apart: about one
    Beat); without the presence flag, by age past LockTTL+LockSkew.
    Otherwise it is left, naming the servers that may hold it (its holder's
    own release clears it);
  - a record missing while its inbox or history remains (deleted or
    evicted): started over with --force (its next join gets Defaults; its
    history stays, so restore can bring a kept version back);
  - fmt, schema, schema.min: left alone (only the build that wrote the data
    knows them): set them by hand after checking.
The repair is one script call, all of it or none; freeing a lock that
names no holder is a second fenced call. Run it with --dry-run first (it
reads presence, and proves a stop, as the repair would).

Flags:
  --driver NAME        the driver's Config.Name, e.g. PlayerData (required)
  --force              also free a lock that names no holder once no live server
                       can hold it, and start a missing record over
  --dry-run            say what would change, change nothing (servers are still asked over
                       --nats: a holder asked releases the lock, which changes nothing stored
                       but the lock)
  --nats URL           NATS, to ask the live servers about a lock that names no holder
                       (default $NATS_URL; none when unset)
  --wait D             how long the servers asked have to answer (default 10s)
  --subject-prefix NAME the servers' NodeConfig.SubjectPrefix (default CKHandoff)
  --request-key-file F a file holding the servers' NodeConfig.RequestKey, byte for byte
  --beat D             the servers' Beat: the span of a proof (default 3/10 of
                       --presence-ttl, the defaults' ratio: 3s)
  --lock-ttl D         the servers' LockTTL (default 3m0s)
  --lock-skew D        the servers' LockSkew (default 1m0s)
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL (default 10s)
  --json               print one JSON object

Exit status: 0 repaired (with --dry-run: would repair), or nothing to
repair; 1 something was left that needs --force, time or a human (it is
listed), or the call failed; 2 usage, no record of KEY, or a namespace or
driver that holds nothing (the ones that do are listed).
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
	// LockAnswer is the lock rule's answer on a lock that names no holder
	// (lockrule.Answer), with its proof's reads and time.
	LockAnswer string  `json:"lock_answer,omitempty"`
	ProofReads int     `json:"proof_reads,omitempty"`
	ProofMS    float64 `json:"proof_ms,omitempty"`
}

// repairLine is one field (or key) and what was done or why it was left.
type repairLine struct {
	Field string `json:"field"`
	What  string `json:"what"`
}

// runRepair is "playerdata repair".
func runRepair(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("repair", repairUsage)
	var (
		f             readFlags
		rf            ruleFlags
		af            adminFlags
		driver        string
		force, dryRun bool
		wait          time.Duration
	)
	f.add(cmd)
	rf.add(cmd)
	af.add(cmd)
	cmd.fs.DurationVar(&wait, "wait", 10*time.Second, "")
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.BoolVar(&force, "force", false, "")
	cmd.fs.BoolVar(&dryRun, "dry-run", false, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	if err := checkRepairArgs(cmd, &f, &rf, &af, driver, pos, wait); err != nil {
		return err
	}
	key := pos[0]
	r, err := f.openProfile(ctx, cmd, driver, key)
	if err != nil {
		return err
	}
	defer r.Close()
	rk := record.Key(r.ns, driver, key)
	env, err := r.env(ctx, rk, rf.rules(f.presenceTTL))
	if err != nil {
		return err
	}
	if url := af.natsServer(); url != "" && force {
		a, err := openAsker(ctx, r, &af, "repair", url, stderr)
		if err != nil {
			return err
		}
		defer a.close()
		env.Ask = a.ask(driver, key, wait)
	}
	res, err := lockrule.Repair(ctx, env, rk, lockrule.RepairOptions{DryRun: dryRun, Force: force})
	if err != nil {
		return fmt.Errorf("repair %s: %w", key, err)
	}
	if !res.Exists && len(res.Changed) == 0 && len(res.Left) == 0 {
		// Not an all-clear: there is nothing here to repair. A namespace or
		// driver that holds nothing is listed with what exists (status 2).
		if err := r.checkScope(ctx, driver, defaultScanLimit); err != nil {
			return err
		}
		return usagef("repair %s: no record of key %q under driver %s in namespace %q: nothing to repair", key, key, driver, r.ns)
	}
	rep := &repairReport{Namespace: r.ns, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun,
		Changed: lines(res.Changed), Left: lines(res.Left)}
	if v := res.Lock; v != nil {
		rep.LockAnswer, rep.ProofReads, rep.ProofMS = v.Answer.String(), v.Reads, ms(v.Took)
	}
	if err := emit(stdout, f.json, rep, func(w io.Writer, st style) { printRepair(w, st, rep) }); err != nil {
		return err
	}
	if len(rep.Left) > 0 {
		return fmt.Errorf("repair %s: %d %s left: %s: %s", key, len(rep.Left), plural(len(rep.Left), "field", "fields"),
			rep.Left[0].Field, rep.Left[0].What)
	}
	return nil
}

// checkRepairArgs checks repair's flags and arguments.
func checkRepairArgs(cmd *command, f *readFlags, rf *ruleFlags, af *adminFlags, driver string, pos []string,
	wait time.Duration) error {
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(pos) != 1:
		return cmd.mistake("one profile KEY, got %d", len(pos))
	}
	if err := rf.check(cmd, f.presenceTTL); err != nil {
		return err
	}
	if err := af.check(cmd); err != nil {
		return err
	}
	if wait <= 0 {
		return cmd.mistake("--wait %v: want a positive duration", wait)
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
	if r.ProofReads > 0 {
		fmt.Fprintf(w, "  %-12s %d presence %s in %s (a stop is proven by two reads at least one Beat apart)\n",
			st.bold("proof"), r.ProofReads, plural(r.ProofReads, "read", "reads"), human(msDuration(r.ProofMS)))
	}
	if len(r.Changed) == 0 && len(r.Left) == 0 {
		fmt.Fprintln(w, "  nothing to repair: every field the library computes with is as it writes it")
	}
}
