package main

// playerdata unlock: free the lock a crashed server left on one profile,
// and never a live server's. The one write an operator command makes
// outside the library (send and restore act through datadriver).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/labenv"
	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/names"
	"github.com/ckernel/playerdata/internal/record"
)

const unlockUsage = `Usage: playerdata unlock [flags] KEY

Frees the lock on profile KEY only when the library's lock rule
(internal/lockrule, the one every server follows) says it may change hands,
so that the next join on any server takes the record at once:
  - its holder is proven stopped: two presence reads at least one Beat
    apart (--beat) both find no live beat, nothing else between, the last
    sent after the lock was written. Proving it takes about one Beat (3 s
    at the defaults); the output says how long it took;
  - the lock carries no presence flag (its holder does not protect it by
    presence) and is older than LockTTL+LockSkew (--lock-ttl, --lock-skew)
    on the Redis clock;
  - the lock names no holder (a broken lock.job) and no live server can
    hold its token: every server in the presence hash is proven stopped
    (or, without the presence flag, by age).
Otherwise it refuses, says why, and when trying again may help:
  - the holder reads alive: freeing it would make a second owner;
  - the holder reads unknown: a missing beat proves nothing yet, because
    Redis restarted or failed over (its data may be older than the beats),
    the presence hash was first beaten into, or its clock stepped, less
    than one PresenceTTL ago (the output says which, from the hash's run
    mark and INFO), or the read failed; unknown never counts as stopped;
  - the lock has no presence flag and is younger than LockTTL+LockSkew.

The unlock is one fenced script call (free.lua) that frees exactly the lock
judged, or nothing: if the lock changed hands meanwhile, or (for the age
rule) was written again, nothing changes and unlock says so. The data, the
kept versions and a pending trade are left as they are (the next load
settles or aborts the trade). --dry-run judges the same way, proof included,
and changes nothing.

Flags:
  --driver NAME        the driver's Config.Name; without it KEY is looked up
                       under every driver (a bounded SCAN) and must be found
                       under exactly one, by a scan that went through
  --dry-run            say what would be done, change nothing
  --limit N            the lookup without --driver examines about N keys at most (default 100000)
  --beat D             the servers' Beat: the span of a proof (default 3/10 of
                       --presence-ttl, the defaults' ratio: 3s)
  --lock-ttl D         the servers' LockTTL (default 3m0s)
  --lock-skew D        the servers' LockSkew (default 1m0s)
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL, to read presence as they do (default 10s)
  --json               print one JSON object

Exit status: 0 freed, or nothing to do (no record, the lock already free or
released meanwhile; with --dry-run: it would free it); 1 refused, failed, or
the lock changed hands meanwhile (nothing done); 2 usage, or a namespace or
--driver that holds nothing (the ones that do are listed).
`

// The outcomes of unlock, as --json prints them.
const (
	unlockFreed             = "freed"         // the release landed
	unlockWouldFree         = "would-free"    // --dry-run
	unlockRefused           = "refused"       // the holder may be alive (Reason)
	unlockNoRecord          = "no-record"     // nothing to do
	unlockAlreadyFree       = "already-free"  // nothing to do
	unlockReleasedMeanwhile = "released"      // the holder released it meanwhile: nothing to do
	unlockChanged           = "changed-hands" // another session took it meanwhile: nothing done
)

// unlockReport is what unlock did, and its --json output.
type unlockReport struct {
	Namespace   string          `json:"namespace"`
	PresenceKey string          `json:"presence_key"`
	Driver      string          `json:"driver"`
	Key         string          `json:"key"`
	RecordKey   string          `json:"record_key"`
	Holder      string          `json:"holder,omitempty"`
	TokenPrefix string          `json:"token_prefix,omitempty"`
	AgeMS       float64         `json:"age_ms,omitempty"`
	Flag        bool            `json:"presence_flag,omitempty"`
	Trade       string          `json:"trade,omitempty"`
	Presence    *holderPresence `json:"holder_presence,omitempty"`
	DryRun      bool            `json:"dry_run,omitempty"`
	Outcome     string          `json:"outcome"`
	// Answer is the lock rule's answer (lockrule.Answer: stopped, alive,
	// unknown, ...); RetryInMS when asking again may give another (0: no
	// time known).
	Answer    string  `json:"answer,omitempty"`
	RetryInMS float64 `json:"retry_in_ms,omitempty"`
	// ProofReads and ProofMS are the presence reads the judgment made and
	// how long it took (a stop is proven by two reads a Beat apart).
	ProofReads int     `json:"proof_reads,omitempty"`
	ProofMS    float64 `json:"proof_ms,omitempty"`
	// Reason says why, in one sentence (a refusal's is the error too).
	Reason string `json:"reason"`
	// NowHeldBy names who holds the lock after a changed-hands outcome.
	NowHeldBy string `json:"now_held_by,omitempty"`
}

// errRefused marks a refusal: status 1, the reason as the message.
var errRefused = errors.New("refused")

// runUnlock is "playerdata unlock".
func runUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("unlock", unlockUsage)
	var (
		f      readFlags
		rf     ruleFlags
		driver string
		dryRun bool
		limit  int
	)
	f.add(cmd)
	rf.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.BoolVar(&dryRun, "dry-run", false, "")
	cmd.fs.IntVar(&limit, "limit", defaultScanLimit, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return cmd.mistake("the profile KEY is required")
	case len(pos) > 1:
		return cmd.mistake("one KEY only, got %d", len(pos))
	case limit < 1:
		return cmd.mistake("--limit %d: want a number of keys, at least 1", limit)
	}
	if err := rf.check(cmd, f.presenceTTL); err != nil {
		return err
	}
	key := pos[0]
	r, err := f.openProfile(ctx, cmd, driver, key)
	if err != nil {
		return err
	}
	defer r.Close()
	var rep *unlockReport
	if driver == "" {
		if driver, err = findDriver(ctx, r, key, limit); err != nil {
			return err
		}
	}
	if driver == "" {
		rep = &unlockReport{Namespace: r.ns, PresenceKey: r.presKey, Key: key, DryRun: dryRun,
			Outcome: unlockNoRecord, Reason: "there is no record of the key under any driver: nothing to do"}
	} else if rep, err = unlock(ctx, r, driver, key, rf.rules(f.presenceTTL), dryRun); err != nil {
		return fmt.Errorf("unlock %s: %w", key, err)
	}
	if rep.Outcome == unlockNoRecord {
		if err := r.checkScope(ctx, driver, limit); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printUnlock(stdout, styleFor(stdout), rep)
	}
	switch rep.Outcome {
	case unlockRefused:
		return fmt.Errorf("unlock %s: %w: %s", key, errRefused, rep.Reason)
	case unlockChanged:
		return fmt.Errorf("unlock %s: nothing done: %s", key, rep.Reason)
	}
	return nil
}

// findDriver looks KEY up under every driver ("SCAN MATCH <ns>:{*:<key>}",
// about limit keys examined at most). It answers the one driver holding a
// record of key, "" when a complete scan found none, and a usage error when
// several do or the scan was cut short (a driver beyond the limit could
// hold the key too).
func findDriver(ctx context.Context, r *reader, key string, limit int) (string, error) {
	prefix := "{"
	if r.ns != "" {
		prefix = r.ns + ":{"
	}
	suffix := ":" + key + "}"
	var drivers []string
	st, err := r.scan(ctx, labenv.GlobEscape(prefix)+"*"+labenv.GlobEscape(suffix), limit, func(_ redis.Cmdable, keys []string) (bool, error) {
		for _, k := range keys {
			if d, ok := strings.CutPrefix(k, prefix); ok {
				if d, ok = strings.CutSuffix(d, suffix); ok && names.Driver(d) == nil {
					drivers = append(drivers, d)
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("unlock %s: look up its driver: %w", key, err)
	}
	slices.Sort(drivers)
	switch {
	case len(drivers) > 1:
		return "", usagef("unlock %s: the key has records under drivers %s: pick one with --driver", key, strings.Join(drivers, ", "))
	case st.Cut:
		found := "no record of it"
		if len(drivers) == 1 {
			found = "a record of it under driver " + drivers[0]
		}
		return "", usagef("unlock %s: %s among the first %d keys examined (of %d), and the scan stopped there: "+
			"give --driver, or raise --limit", key, found, st.Examined, st.DBSize)
	case len(drivers) == 1:
		return drivers[0], nil
	}
	return "", nil
}

// unlock runs the library's unlock (lockrule.Unlock) on driver/key: it
// reads the lock, has the lock rule judge it (proving a stop when it must),
// and frees it on a yes, in one fenced call that frees exactly the lock
// judged. The error is for a failed call only; a refusal is an outcome.
func unlock(ctx context.Context, r *reader, driver, key string, rules lockrule.Rules, dryRun bool) (*unlockReport, error) {
	rk := record.Key(r.ns, driver, key)
	rep := &unlockReport{Namespace: r.ns, PresenceKey: r.presKey, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun}
	env, err := r.env(ctx, rk, rules)
	if err != nil {
		return nil, err
	}
	res, err := lockrule.Unlock(ctx, env, rk, dryRun)
	if err != nil {
		return nil, err
	}
	l, v := res.Read.Lock, res.Verdict
	rep.Holder, rep.TokenPrefix, rep.Flag, rep.Trade = cmp.Or(l.Job, noHolder), prefix8(l.Token), l.Flag == lockrule.FlagOn, res.Read.Trade
	if l.Held && !l.AtBroken {
		rep.AgeMS = ms(l.Age)
	}
	if v.Answer != 0 {
		rep.Answer, rep.RetryInMS, rep.ProofReads, rep.ProofMS = v.Answer.String(), ms(v.RetryIn), v.Reads, ms(v.Took)
	}
	if v.Reads > 0 && l.Job != "" {
		h := r.holderOf(ctx, l.Job, v.Reading)
		rep.Presence = &h
	}
	switch res.Outcome {
	case lockrule.UnlockNoRecord:
		rep.Outcome, rep.Reason = unlockNoRecord, "there is no record of the key: nothing to do"
	case lockrule.UnlockAlreadyFree:
		rep.Outcome, rep.Reason = unlockAlreadyFree, "the lock is free: nothing to do"
	case lockrule.UnlockReleased:
		rep.Outcome, rep.Reason = unlockReleasedMeanwhile, l.Job+" released the lock itself meanwhile: nothing to do"
	case lockrule.UnlockRefused:
		rep.Outcome, rep.Reason = unlockRefused, lockrule.Explain(v)
		switch h := rep.Presence; {
		case h != nil && h.noHash:
			rep.Reason = fmt.Sprintf("there is no presence hash %s: nothing is known of %s's presence, and an unknown "+
				"reading never counts as stopped (are --namespace, --presence-key and --presence-shards the servers' own?)",
				r.pres.KeyOf(l.Job), l.Job)
		case h != nil && h.Why != "":
			rep.Reason += " (" + h.Why + ")"
		}
	case lockrule.UnlockWouldFree:
		rep.Outcome = unlockWouldFree
		rep.Reason = fmt.Sprintf("unlock would release the lock of %s (token %s…) in one fenced call: %s; nothing was changed",
			rep.Holder, rep.TokenPrefix, v.Why)
	case lockrule.UnlockFreed:
		rep.Outcome = unlockFreed
		rep.Reason = fmt.Sprintf("the lock of %s (token %s…) is released (%s); the next join on any server takes the "+
			"record at once", rep.Holder, rep.TokenPrefix, v.Why)
	case lockrule.UnlockChanged:
		rep.Outcome, rep.NowHeldBy = unlockChanged, res.NowHeldBy
		rep.Reason = fmt.Sprintf("the lock changed hands meanwhile: %s holds it now; nothing was changed",
			cmp.Or(res.NowHeldBy, noHolder))
	}
	return rep, nil
}

// noHolder stands for the holder of a lock whose lock.job is empty.
const noHolder = "(no holder named)"

// printUnlock prints a report for people.
func printUnlock(w io.Writer, st style, r *unlockReport) {
	row := func(label, value string) { fmt.Fprintf(w, "  %-10s %s\n", st.bold(label), value) }
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	if r.Holder != "" {
		row("lock", fmt.Sprintf("held by %s, token %s…, age %s, presence flag %s", r.Holder, r.TokenPrefix,
			human(msDuration(r.AgeMS)), flagText(r.Flag)))
	}
	if r.Presence != nil {
		row("holder", r.Holder+" is "+r.Presence.String())
	}
	if r.ProofReads > 0 {
		row("proof", fmt.Sprintf("%d presence %s in %s (a stop is proven by two reads at least one Beat apart)",
			r.ProofReads, plural(r.ProofReads, "read", "reads"), human(msDuration(r.ProofMS))))
	}
	if r.Trade != "" {
		row("trade", r.Trade+" pending: left on the record for the next load to settle or abort")
	}
	var out string
	switch r.Outcome {
	case unlockRefused, unlockChanged:
		return // the error main prints says it, on stderr
	case unlockFreed:
		out = st.green("freed") + ": " + r.Reason
	case unlockWouldFree:
		out = st.yellow("dry run") + ": " + r.Reason
	default:
		out = r.Reason
	}
	fmt.Fprintf(w, "  → %s\n", wrapText(out, 90, "    "))
}
