package main

// playerdata replay: put dead-lettered messages back in a profile's inbox,
// once what made OnMessage refuse them is mended. One script call
// (record.ReplayDeadLetters) moves them, so a replay lands whole or not at
// all.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

const replayUsage = `Usage: playerdata replay --driver NAME [flags] KEY (ID... | --all)

Moves dead letters of profile KEY back to its inbox: the messages a holder's
OnMessage refused Config.MaxMessageAttempts times (inspect lists them, with
their ids, attempts and last error). Each goes back with its body and
idempotency key under a new inbox id, its refusal count starting over; the
inbox's MaxInbox does not apply. Name the dead letters by their ids, or give
--all (at most 1000 per call). The move is one script call: all of them or
none. Who applies them then: the holder at its next autosave or inbox pull,
or the next load when no server holds the profile (replay does not notify
over NATS). --dry-run lists what would move and changes nothing.

Flags:
  --driver NAME        the driver's Config.Name, e.g. PlayerData (required)
  --all                every dead letter (at most 1000)
  --dry-run            say what would be moved, change nothing
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL (default 10s)
  --json               print one JSON object

Exit status: 0 moved (with --dry-run: would move), or nothing to move; 1
failed (a key of the record is not what the library writes: nothing moved);
2 usage: no ID and no --all, an ID that is not a dead letter of KEY, or a
namespace or --driver that holds nothing.
`

// maxReplay is how many dead letters one call moves (replay.lua's bound).
const maxReplay = 1000

// replayReport is what replay did, and its --json output.
type replayReport struct {
	Namespace string       `json:"namespace"`
	Driver    string       `json:"driver"`
	Key       string       `json:"key"`
	RecordKey string       `json:"record_key"`
	DryRun    bool         `json:"dry_run,omitempty"`
	Chosen    []deadReport `json:"chosen"` // the dead letters named (or all)
	Moved     int          `json:"moved"`
	Holder    string       `json:"holder,omitempty"` // who holds the profile now
	Next      string       `json:"next"`             // who applies them, in one sentence
}

// runReplay is "playerdata replay".
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("replay", replayUsage)
	var (
		f           readFlags
		driver      string
		all, dryRun bool
	)
	f.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.BoolVar(&all, "all", false, "")
	cmd.fs.BoolVar(&dryRun, "dry-run", false, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(pos) == 0:
		return cmd.mistake("the profile KEY is required")
	case len(pos) == 1 && !all:
		return cmd.mistake("name the dead letters to replay by their ids (inspect lists them), or give --all")
	case len(pos) > 1 && all:
		return cmd.mistake("ids and --all: give one or the other")
	}
	key, ids := pos[0], pos[1:]
	r, err := f.openProfile(ctx, cmd, driver, key)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := replay(ctx, r, driver, key, ids, dryRun, stderr)
	if err != nil {
		return err
	}
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printReplay(w, st, rep) })
}

// replay checks that ids (every dead letter when empty) are dead letters
// of driver/key and, unless dryRun, moves them back in one script call.
func replay(ctx context.Context, r *reader, driver, key string, ids []string, dryRun bool, stderr io.Writer) (*replayReport, error) {
	rk := datadriver.RecordKey(r.ns, driver, key)
	rep := &replayReport{Namespace: r.ns, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun, Chosen: []deadReport{}}
	dead, err := record.ReadDeadLetters(ctx, r.rdb, rk, maxReplay)
	if err != nil {
		return nil, fmt.Errorf("replay %s: read the dead letters: %w", key, err)
	}
	if len(dead) == 0 {
		if err := r.checkScope(ctx, driver, defaultScanLimit, stderr); err != nil {
			return nil, err
		}
	}
	byID := map[string]record.DeadLetter{}
	for _, d := range dead {
		byID[d.ID] = d
	}
	if len(ids) == 0 {
		for _, d := range dead {
			ids = append(ids, d.ID)
		}
	}
	var missing []string
	for _, id := range ids {
		d, ok := byID[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		rep.Chosen = append(rep.Chosen, deadReport{ID: d.ID, OriginalID: d.MessageID, Attempts: int64(d.Attempts),
			LastError: d.Err, RefusedBy: d.Job, IdemKey: d.IdempotencyKey, Bytes: len(d.Body)})
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(dead))
		for _, d := range dead {
			have = append(have, d.ID)
		}
		return nil, usagef("replay %s: not a dead letter of the profile: %s (its dead letters: %s)", key,
			strings.Join(missing, ", "), cmp.Or(strings.Join(have, ", "), "none"))
	}
	l, _, err := r.readLock(ctx, rk)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", key, err)
	}
	if l.Held() {
		rep.Holder = l.Job
	}
	if len(rep.Chosen) > 0 && !dryRun {
		res, err := record.ReplayDeadLetters(ctx, r.rdb, rk, ids)
		if err != nil {
			return nil, fmt.Errorf("replay %s (it may or may not have landed; inspect shows which): %w", key, err)
		}
		if res.Corrupt.Field != "" {
			return nil, fmt.Errorf("replay %s: nothing moved: its %s is not what the library writes: %s", key,
				res.Corrupt.Field, res.Corrupt.Why)
		}
		rep.Moved, rep.Holder = res.Moved, res.Holder.Job
	}
	rep.Next = replayNext(rep)
	return rep, nil
}

// replayNext says who applies the moved messages.
func replayNext(r *replayReport) string {
	n := len(r.Chosen)
	switch {
	case n == 0:
		return "the profile has no dead letter: nothing to replay"
	case r.DryRun:
		return fmt.Sprintf("replay would move %d %s back to the inbox; nothing was changed", n, plural(n, "dead letter", "dead letters"))
	case r.Holder == "":
		return "no server holds the profile: the next load applies them before its Join returns"
	}
	return r.Holder + " holds the profile: it applies them at its next autosave or inbox pull (it was not told over NATS), " +
		"or the next load does"
}

// printReplay prints a report for people.
func printReplay(w io.Writer, st style, r *replayReport) {
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	for _, d := range r.Chosen {
		fmt.Fprintf(w, "  %-10s %s (sent as %s), %d attempts, last refused by %s: %q\n", st.bold("dead"), d.ID, d.OriginalID,
			d.Attempts, d.RefusedBy, d.LastError)
	}
	if !r.DryRun && len(r.Chosen) > 0 {
		fmt.Fprintf(w, "  %-10s %d %s back in the inbox\n", st.bold("moved"), r.Moved, plural(r.Moved, "message", "messages"))
	}
	fmt.Fprintf(w, "  → %s\n", wrapText(r.Next, 90, "    "))
}
