package main

// playerdata unlock: free the lock a crashed server left on one profile,
// and never a live server's. The one write an operator command makes
// outside the library (send and restore act through datadriver).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/labenv"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/presence"
)

const unlockUsage = `Usage: playerdata unlock [flags] KEY

Frees the lock on profile KEY, only when its holder reads stopped or unknown
in presence (read as the servers read it), so that the next join on any
server takes the record at once. Stopped: no live beat for a full
PresenceTTL. Unknown: a missing beat proves nothing yet, because Redis
restarted or failed over, or the presence hash was first beaten into, less
than one PresenceTTL ago (the output says which, from the hash's run mark
and INFO). Otherwise it refuses and
says why:
  - the holder reads alive: it would lose a live session;
  - the lock has no presence flag: its holder does not beat presence, so a
    missing beat proves nothing (such a lock changes hands by release, or by
    age after LockTTL+LockSkew);
  - the presence read failed, or the holder's presence hash does not exist
    (check --namespace, --presence-key and --presence-shards).

The unlock is one fenced script call: the release a server makes, without
data, under the lock token just read. If the lock changed hands meanwhile,
nothing changes and unlock says so. The data, the kept versions and a
pending trade are left as they are (the next load settles or aborts the
trade).

Flags:
  --driver NAME        the driver's Config.Name; without it KEY is looked up
                       under every driver (a bounded SCAN) and must be found
                       under exactly one, by a scan that went through
  --dry-run            say what would be done, change nothing
  --limit N            the lookup without --driver examines about N keys at most (default 100000)
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
		driver string
		dryRun bool
		limit  int
	)
	f.add(cmd)
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
	} else if rep, err = unlock(ctx, r, driver, key, dryRun); err != nil {
		return fmt.Errorf("unlock %s: %w", key, err)
	}
	if rep.Outcome == unlockNoRecord {
		if err := r.checkScope(ctx, driver, limit, stderr); err != nil {
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
				if d, ok = strings.CutSuffix(d, suffix); ok && datadriver.ValidName(d) == nil {
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

// unlock reads the lock of driver/key and its holder's presence, and frees
// the lock when the holder reads stopped or unknown (unless dryRun): a bare
// release under the token just read, so a lock that changed hands meanwhile
// is left alone. The error is for a failed call only; a refusal is an
// outcome.
func unlock(ctx context.Context, r *reader, driver, key string, dryRun bool) (*unlockReport, error) {
	rk := datadriver.RecordKey(r.ns, driver, key)
	rep := &unlockReport{Namespace: r.ns, PresenceKey: r.presKey, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun}
	l, now, err := r.readLock(ctx, rk)
	if err != nil {
		return nil, err
	}
	switch {
	case l.Err != nil:
		return nil, fmt.Errorf("read the record: %w", l.Err)
	case !l.Exists:
		rep.Outcome, rep.Reason = unlockNoRecord, "there is no record of the key: nothing to do"
		return rep, nil
	case !l.Held():
		rep.Outcome, rep.Reason = unlockAlreadyFree, "the lock is free: nothing to do"
		return rep, nil
	}
	rep.Holder, rep.TokenPrefix, rep.Flag, rep.Trade = l.Job, prefix8(l.Token), l.Presence, l.Trade
	if !l.At.IsZero() {
		rep.AgeMS = ms(now.Sub(l.At))
	}
	if reason := refusal(ctx, r, l, rep); reason != "" {
		rep.Outcome, rep.Reason = unlockRefused, reason
		return rep, nil
	}
	if dryRun {
		rep.Outcome = unlockWouldFree
		rep.Reason = fmt.Sprintf("unlock would release the lock of %s (token %s…) in one fenced call; nothing was changed",
			l.Job, rep.TokenPrefix)
		return rep, nil
	}
	res, err := record.Save(ctx, r.rdb, rk, record.SaveArgs{Mode: record.ModeRelease, Token: l.Token})
	if err != nil {
		return nil, fmt.Errorf("release (it may or may not have landed; run unlock again to see): %w", err)
	}
	switch {
	case res.Outcome == record.Written && res.How == record.HowReleased:
		rep.Outcome = unlockFreed
		rep.Reason = fmt.Sprintf("the lock of %s (token %s…) is released; the next join on any server takes the record at once",
			l.Job, rep.TokenPrefix)
	case res.Outcome == record.Written:
		rep.Outcome, rep.Reason = unlockReleasedMeanwhile, l.Job+" released the lock itself meanwhile: nothing to do"
	case res.Outcome == record.LockLost && res.Holder.Token == "":
		rep.Outcome, rep.Reason = unlockAlreadyFree, "the lock was freed meanwhile (another release): nothing to do"
	case res.Outcome == record.LockLost:
		rep.Outcome, rep.NowHeldBy = unlockChanged, res.Holder.Job
		rep.Reason = fmt.Sprintf("the lock changed hands meanwhile: %s holds it now (token %s…); nothing was changed",
			res.Holder.Job, prefix8(res.Holder.Token))
	default:
		return nil, fmt.Errorf("release: unexpected answer %+v", res)
	}
	return rep, nil
}

// refusal reads the holder's presence into rep and returns why unlock must
// not free l, or "" when it may: the holder reads stopped, or unknown
// because Redis restarted or failed over less than one PresenceTTL ago (the
// presence hash exists, but its run is new).
func refusal(ctx context.Context, r *reader, l recordLock, rep *unlockReport) string {
	if !l.Presence {
		return fmt.Sprintf("the lock has no presence flag: %s does not beat presence for it (handoff off, or an older "+
			"build), so its presence proves nothing; the lock changes hands when %s releases it, or by age once "+
			"older than LockTTL+LockSkew (240 s by default; it is %s old)", l.Job, l.Job, human(msDuration(rep.AgeMS)))
	}
	// The holder's own shard must exist: a missing one reads unknown, and
	// says only that this reader looks in the wrong place (a wrong
	// --namespace, --presence-key or --presence-shards).
	shard := r.pres.KeyOf(l.Job)
	n, err := r.rdb.Exists(ctx, shard).Result()
	if err != nil {
		return fmt.Sprintf("the presence hash %s could not be read (%v): nothing is known of %s's presence", shard, err, l.Job)
	}
	if n == 0 {
		return fmt.Sprintf("there is no presence hash %s: nothing is known of %s's presence "+
			"(are --namespace, --presence-key and --presence-shards the servers' own?)", shard, l.Job)
	}
	h := r.readHolder(ctx, l.Job)
	rep.Presence = &h
	switch rd := h.reading; {
	case rd.Status == presence.Alive:
		return fmt.Sprintf("%s is alive (its beat expires in %s): it would lose a live session; ask it to release, or wait",
			l.Job, human(rd.ExpiresIn))
	case rd.Err != nil:
		return fmt.Sprintf("%s's presence could not be read (%v): it may be alive", l.Job, rd.Err)
	}
	return ""
}

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
