package main

// playerdata replay: have refused messages of a profile tried again, once
// what made OnMessage refuse them is mended: dead letters go back to the
// inbox, waiting messages have their refusals start over. One script call
// (record.Replay) does it, so a replay lands whole or not at all; with NATS
// the holder is told at once.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
)

const replayUsage = `Usage: playerdata replay --driver NAME [flags] KEY (ID... | --all)

Has messages of profile KEY tried again, once what made the servers'
OnMessage refuse them is mended (inspect lists them, with their ids,
refusals and last error):
  - a dead letter (a message refused Config.MaxMessageAttempts times) moves
    back to the inbox with its body and idempotency key, under a new inbox
    id, its refusal count starting over; the inbox's MaxInbox does not apply;
  - a message still waiting in the inbox stays there, its refusal count
    starting over (its next refusal does not make it a dead letter).
Name them by their ids (a dead letter's id, or a waiting message's), or
give --all: every dead letter (at most 1000 per call) and every waiting
message refused at least once. One script call: all of it or none.

Who tries them then: with --nats, the server holding the profile is told at
once (the notification a send makes) and tries them within a round trip;
without, it tries them at its next save (an autosave, within its Autosave
period) or its own retry of refused messages; when no server holds the
profile, the next load. --dry-run lists what would change and changes
nothing.

Flags:
  --driver NAME         the driver's Config.Name, e.g. PlayerData (required)
  --all                 every dead letter (at most 1000) and every refused waiting message
  --dry-run             say what would change, change nothing
  --nats URL            NATS, to tell the holder at once (default $NATS_URL; none when unset)
  --subject-prefix NAME the servers' NodeConfig.SubjectPrefix (default CKHandoff)
  --request-key-file F  a file holding the servers' NodeConfig.RequestKey, byte for byte
  --redis URL           Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                        $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS        the servers' NodeConfig.Namespace (default none)
  --presence-key NAME   the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N   override the shard count the servers mark in "<key>:shards"
  --presence-ttl D      the servers' PresenceTTL (default 10s)
  --json                print one JSON object

Exit status: 0 done (with --dry-run: would be), or nothing to replay (a
warning on stderr when NATS failed: the replay landed, the holder was not
told); 1 failed (a key of the record is not what the library writes:
nothing changed); 2 usage: no ID and no --all, an ID that is neither a dead
letter nor a waiting message of KEY, or a namespace or --driver that holds
nothing.
`

// maxReplay is how many dead letters one call moves (replay.lua's bound).
const maxReplay = 1000

// replayReport is what replay did, and its --json output.
type replayReport struct {
	Namespace string `json:"namespace"`
	Driver    string `json:"driver"`
	Key       string `json:"key"`
	RecordKey string `json:"record_key"`
	DryRun    bool   `json:"dry_run,omitempty"`
	// Chosen are the dead letters named (or all); Waiting the waiting
	// messages named (or all those refused).
	Chosen  []deadReport    `json:"chosen"`
	Waiting []messageReport `json:"waiting"`
	// Moved counts the dead letters put back, Retried the waiting messages
	// whose refusals start over.
	Moved    int    `json:"moved"`
	Retried  int    `json:"retried"`
	Holder   string `json:"holder,omitempty"` // who holds the profile now
	Notified bool   `json:"notified"`         // the holder was told over NATS
	Next     string `json:"next"`             // who tries them, in one sentence
}

// runReplay is "playerdata replay".
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("replay", replayUsage)
	var (
		f           readFlags
		af          adminFlags
		driver      string
		all, dryRun bool
	)
	f.add(cmd)
	af.add(cmd)
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
		return cmd.mistake("name the messages to replay by their ids (inspect lists the dead letters and the refused " +
			"waiting messages), or give --all")
	case len(pos) > 1 && all:
		return cmd.mistake("ids and --all: give one or the other")
	}
	if err := af.check(cmd); err != nil {
		return err
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
	if rep.Moved+rep.Retried > 0 && rep.Holder != "" && af.natsServer() != "" {
		if err := notifyHolder(ctx, &af, "replay", rep.Namespace, driver, key, rep.Holder, stderr); err != nil {
			fmt.Fprintf(stderr, "playerdata: warning: the replay landed, but %s was not told: %v\n", rep.Holder, oneLine(err.Error()))
		} else {
			rep.Notified = true
		}
	}
	rep.Next = replayNext(rep)
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printReplay(w, st, rep) })
}

// replay finds ids (when empty: every dead letter and every refused
// waiting message) among the dead letters and the inbox of driver/key and,
// unless dryRun, has them tried again in one script call.
func replay(ctx context.Context, r *reader, driver, key string, ids []string, dryRun bool, stderr io.Writer) (*replayReport, error) {
	rk := record.Key(r.ns, driver, key)
	rep := &replayReport{Namespace: r.ns, Driver: driver, Key: key, RecordKey: rk, DryRun: dryRun, Chosen: []deadReport{},
		Waiting: []messageReport{}}
	if err := chooseReplay(ctx, r, rep, ids); err != nil {
		return nil, err
	}
	if len(rep.Chosen)+len(rep.Waiting) == 0 {
		if err := r.checkScope(ctx, driver, defaultScanLimit); err != nil {
			return nil, err
		}
	}
	l, _, err := r.readLock(ctx, rk)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", key, err)
	}
	if l.Held() {
		rep.Holder = l.Job
	}
	if len(rep.Chosen)+len(rep.Waiting) == 0 || dryRun {
		return rep, nil
	}
	chosen := make([]string, 0, len(rep.Chosen)+len(rep.Waiting))
	for _, d := range rep.Chosen {
		chosen = append(chosen, d.ID)
	}
	for _, m := range rep.Waiting {
		chosen = append(chosen, m.ID)
	}
	res, err := record.Replay(ctx, r.rdb, rk, chosen)
	if err != nil {
		return nil, fmt.Errorf("replay %s (it may or may not have landed; inspect shows which): %w", key, err)
	}
	if res.Corrupt.Field != "" {
		return nil, fmt.Errorf("replay %s: nothing changed: its %s is not what the library writes: %s", key,
			res.Corrupt.Field, res.Corrupt.Why)
	}
	rep.Moved, rep.Retried, rep.Holder = res.Moved, res.Retried, res.Holder.Job
	return rep, nil
}

// chooseReplay fills rep.Chosen and rep.Waiting with the dead letters and
// waiting messages ids names; with no ids, every dead letter (at most
// maxReplay) and every waiting message refused at least once. A named id
// that is neither is a usage error.
func chooseReplay(ctx context.Context, r *reader, rep *replayReport, ids []string) error {
	rk, key := rep.RecordKey, rep.Key
	dead, err := record.ReadDeadLetters(ctx, r.rdb, rk, maxReplay)
	if err != nil {
		return fmt.Errorf("replay %s: read the dead letters: %w", key, err)
	}
	tries, err := r.rdb.HGetAll(ctx, record.TriesKey(rk)).Result()
	if err != nil {
		return fmt.Errorf("replay %s: read the refusals: %w", key, err)
	}
	byID := map[string]record.DeadLetter{}
	for _, d := range dead {
		byID[d.ID] = d
	}
	named := len(ids) > 0
	if !named {
		for _, d := range dead {
			ids = append(ids, d.ID)
		}
		ids = append(ids, refusedIDs(tries)...)
	}
	var missing []string
	for _, id := range ids {
		if d, ok := byID[id]; ok {
			rep.Chosen = append(rep.Chosen, deadReport{ID: d.ID, OriginalID: d.MessageID, Attempts: int64(d.Attempts),
				LastError: d.Err, RefusedBy: d.Job, IdemKey: d.IdempotencyKey, Bytes: len(d.Body)})
			continue
		}
		m, ok, err := waitingMessage(ctx, r.rdb, rk, id, tries)
		switch {
		case err != nil:
			return fmt.Errorf("replay %s: read the inbox: %w", key, err)
		case ok:
			rep.Waiting = append(rep.Waiting, m)
		case named:
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		have := make([]string, 0, len(dead))
		for _, d := range dead {
			have = append(have, d.ID)
		}
		return usagef("replay %s: neither a dead letter nor a waiting message of the profile: %s (its dead letters: %s; "+
			"its refused waiting messages: %s)", key, strings.Join(missing, ", "), cmp.Or(strings.Join(have, ", "), "none"),
			cmp.Or(strings.Join(refusedIDs(tries), ", "), "none"))
	}
	return nil
}

// refusedIDs are the message ids of a refusal-count hash (its fields
// without a suffix), sorted.
func refusedIDs(tries map[string]string) []string {
	var ids []string
	for name := range tries {
		if !strings.Contains(name, ":") {
			ids = append(ids, name)
		}
	}
	slices.Sort(ids)
	return ids
}

// waitingMessage reads message id of the inbox of record rk (ok false when
// it is not there), with its refusals from tries.
func waitingMessage(ctx context.Context, rdb redis.UniversalClient, rk, id string, tries map[string]string) (messageReport, bool, error) {
	if (record.Message{ID: id}).At().IsZero() {
		return messageReport{}, false, nil // not a stream id
	}
	xs, err := rdb.XRange(ctx, record.InboxKey(rk), id, id).Result()
	if err != nil || len(xs) == 0 {
		return messageReport{}, false, err
	}
	m := messageReport{ID: id, Bytes: len(str(xs[0].Values[record.EntryBody])), IdemKey: str(xs[0].Values[record.EntryIdemKey]),
		LastError: tries[id+record.TriesErrSuffix], RefusedBy: tries[id+record.TriesJobSuffix]}
	m.Refusals, _ = strconv.ParseInt(tries[id], 10, 64)
	return m, true, nil
}

// replayNext says who tries the messages now.
func replayNext(r *replayReport) string {
	n := len(r.Chosen) + len(r.Waiting)
	switch {
	case n == 0:
		return "the profile has no dead letter and no refused waiting message: nothing to replay"
	case r.DryRun:
		return fmt.Sprintf("replay would move %d %s back to the inbox and start the refusals of %d waiting %s over; "+
			"nothing was changed", len(r.Chosen), plural(len(r.Chosen), "dead letter", "dead letters"), len(r.Waiting),
			plural(len(r.Waiting), "message", "messages"))
	case r.Holder == "":
		return "no server holds the profile: the next load tries them before its Join returns"
	case r.Notified:
		return r.Holder + " holds the profile and was told over NATS: it tries them within a round trip; inspect shows " +
			"any it refuses again"
	}
	return r.Holder + " holds the profile; it was not told over NATS (no --nats): it tries them at its next save " +
		"(an autosave) or its own retry of refused messages"
}

// printReplay prints a report for people.
func printReplay(w io.Writer, st style, r *replayReport) {
	fmt.Fprintf(w, "%s %s\n", st.bold("record"), r.RecordKey)
	for _, d := range r.Chosen {
		fmt.Fprintf(w, "  %-10s %s (sent as %s), %d attempts, last refused by %s: %q\n", st.bold("dead"), d.ID, d.OriginalID,
			d.Attempts, d.RefusedBy, d.LastError)
	}
	for _, m := range r.Waiting {
		fmt.Fprintf(w, "  %-10s %s, refused %d %s, last by %s: %q\n", st.bold("waiting"), m.ID, m.Refusals,
			plural(int(m.Refusals), "time", "times"), cmp.Or(m.RefusedBy, "nobody"), m.LastError)
	}
	if !r.DryRun && len(r.Chosen)+len(r.Waiting) > 0 {
		fmt.Fprintf(w, "  %-10s %d %s back in the inbox, %d waiting %s to try again\n", st.bold("replayed"), r.Moved,
			plural(r.Moved, "dead letter", "dead letters"), r.Retried, plural(r.Retried, "message", "messages"))
	}
	fmt.Fprintf(w, "  → %s\n", wrapText(r.Next, 90, "    "))
}
