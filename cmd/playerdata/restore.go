package main

// playerdata restore: put back the data a profile had at a given time, from
// its kept versions (Driver.RestoreAt), under the profile's lock like any
// load; the way out for a record whose data does not decode.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
)

const restoreUsage = `Usage: playerdata restore --driver NAME --at TIME [flags] KEY

Puts back the data profile KEY of driver NAME had at TIME: the newest kept
version written at or before TIME becomes the current data, written as a new
version, and the data it replaces is kept as a version (so a restore can be
undone with another). This is Driver.RestoreAt; it works whatever the current
data is, so it repairs a record whose data does not decode (inspect says
"corrupt"). The data is restored byte for byte, unknown to this command.
Inbox, user ids, metadata and the other kept versions are left as they are;
messages applied after TIME are undone with the rest of the data (they left
the inbox when applied): send them again if they should stand.

TIME is RFC 3339 ("2024-06-10T09:00:00Z", with fractions of a second if
wanted; inspect's version times can be pasted) or relative to Redis's clock,
looking back: "-2h", "-90m", "-36h".

The restore takes the profile's lock like any load:
  - the lock is free: it is taken at once;
  - a server holds it, --nats given: that server is asked to save and hand
    the profile over (its player is disconnected, and their next join loads
    the restored data), waiting up to --wait (default 15s);
  - a server holds it, no NATS: refused at once, naming the holder, nothing
    changed; restore once the player has left, give --nats, or give --wait D
    to wait for a crashed holder to be proven stopped (about one PresenceTTL).
The command runs a Node of its own for it (JobID "playerdata-restore-<8
hex>", beating presence, so a crash of the command frees the lock like a
server's crash). Servers that authenticate their messages
(NodeConfig.RequestKey) drop its requests unless --request-key-file names a
file holding their key.

A version written at another schema version than the record's current one is
refused: it would need the game's migrations, which only the game has
(restore it from the game's code with Driver.RestoreAt).

--dry-run prints the version that would be restored (its ver, write time,
size and schema version, read and decoded as a restore would) and changes
nothing: it takes no lock.

Flags:
  --driver NAME         the driver's Config.Name, e.g. PlayerData (required)
  --at TIME             the time to go back to (required)
  --dry-run             say which version would be restored, change nothing
  --nats URL            NATS, to ask a holder to hand over (default $NATS_URL; none when unset)
  --wait D              how long to wait for a holder (default 15s with NATS, 0 without)
  --subject-prefix NAME the servers' NodeConfig.SubjectPrefix (default CKHandoff)
  --request-key-file F  a file holding the servers' NodeConfig.RequestKey, byte for byte
  --redis URL           Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                        $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS        the servers' NodeConfig.Namespace (default none)
  --presence-key NAME   the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N   override the shard count the servers mark in "<key>:shards"
  --presence-ttl D      the servers' PresenceTTL (default 10s)
  --json                print one JSON object

Exit status: 0 restored (with --dry-run: it would restore), or nothing to do
(the data as of TIME is the current data); 1 failed or refused (the lock is
held, the version does not decode or has another schema version: nothing
changed); 2 usage, or nothing found: no record of KEY, no kept version at or
before TIME, or only the current data, which does not decode.
`

// The outcomes of restore, as --json prints them.
const (
	restoreDone    = "restored"      // the restore landed and the lock is released
	restoreWould   = "would-restore" // --dry-run
	restoreCurrent = "current"       // the data as of TIME is the current data: nothing to do
)

// restoreReport is what restore did, and its --json output.
type restoreReport struct {
	Namespace string    `json:"namespace"`
	Driver    string    `json:"driver"`
	Key       string    `json:"key"`
	RecordKey string    `json:"record_key"`
	At        time.Time `json:"at"` // TIME, on the Redis clock
	DryRun    bool      `json:"dry_run,omitempty"`
	// Holder is who held the lock when read ("" when free), and its
	// presence then.
	Holder         string       `json:"holder,omitempty"`
	HolderPresence string       `json:"holder_presence,omitempty"`
	Current        *versionInfo `json:"current"`          // before the restore
	Target         *versionInfo `json:"target,omitempty"` // the version restored
	Outcome        string       `json:"outcome"`
	// NewVer is the record's ver after the restore; Replaced the data it
	// replaced, now a kept version (nil when it is not kept).
	NewVer   int64        `json:"new_ver,omitempty"`
	Replaced *versionInfo `json:"replaced,omitempty"`
	Reason   string       `json:"reason"`

	now time.Time // Redis TIME when read
}

// versionInfo is one version of the record.
type versionInfo struct {
	Ver       int64     `json:"ver"`
	At        time.Time `json:"at"`              // when it was written (Redis clock)
	Bytes     int       `json:"bytes,omitempty"` // the data's size, uncompressed
	Schema    int       `json:"schema"`
	SchemaMin int       `json:"schema_min"`
	// Corrupt says why the current data does not decode.
	Corrupt string `json:"corrupt,omitempty"`
	current bool
}

// restoreFlags are restore's own flags.
type restoreFlags struct {
	read    readFlags
	admin   adminFlags
	driver  string
	at      string
	dryRun  bool
	wait    time.Duration
	waitSet bool
}

// runRestore is "playerdata restore".
func runRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("restore", restoreUsage)
	var f restoreFlags
	f.read.add(cmd)
	f.admin.add(cmd)
	cmd.fs.StringVar(&f.driver, "driver", "", "")
	cmd.fs.StringVar(&f.at, "at", "", "")
	cmd.fs.BoolVar(&f.dryRun, "dry-run", false, "")
	cmd.fs.DurationVar(&f.wait, "wait", 0, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	cmd.fs.Visit(func(fl *flag.Flag) { f.waitSet = f.waitSet || fl.Name == "wait" })
	switch {
	case f.driver == "":
		return cmd.mistake("--driver is required")
	case f.at == "":
		return cmd.mistake("--at is required (RFC 3339, or relative: -2h)")
	case len(pos) == 0:
		return cmd.mistake("the profile KEY is required")
	case len(pos) > 1:
		return cmd.mistake("one KEY only, got %d", len(pos))
	case f.wait < 0:
		return cmd.mistake("--wait %s: want a duration, 0 or more", f.wait)
	}
	at, err := parseAt(f.at)
	if err != nil {
		return cmd.mistake("--at %q: %v", f.at, err)
	}
	if err := f.read.check(cmd); err != nil {
		return err
	}
	if err := f.admin.check(cmd); err != nil {
		return err
	}
	key := pos[0]
	if err := checkProfile("restore", f.driver, key); err != nil {
		return err
	}
	r, err := f.read.open(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := restore(ctx, r, &f, key, at, stderr)
	if rep != nil {
		if f.read.json {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil {
				return errors.Join(err, jerr)
			}
		} else {
			printRestore(stdout, styleFor(stdout), rep)
		}
	}
	return err
}

// restore reads the record and its versions, picks the version as of at,
// checks that this command may restore it, reads it as the restore would,
// and (unless --dry-run) restores it with Driver.RestoreAt. The report is
// nil when nothing is to be shown; a refusal comes with its report.
func restore(ctx context.Context, r *reader, f *restoreFlags, key string, at timeSpec, stderr io.Writer) (*restoreReport, error) {
	st, err := readRestoreState(ctx, r, f.driver, key)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", key, err)
	}
	if !st.exists {
		if err := r.checkScope(ctx, f.driver, defaultScanLimit); err != nil {
			return nil, err
		}
		return nil, usagef("restore %s: no record of the key under driver %s in namespace %q: nothing to restore",
			key, f.driver, r.ns)
	}
	if len(st.versions) == 0 {
		return nil, usagef("restore %s: the record holds no data yet (never saved): nothing to restore", key)
	}
	t := at.resolve(st.now)
	rep := &restoreReport{Namespace: r.ns, Driver: f.driver, Key: key, RecordKey: st.rk, At: t, DryRun: f.dryRun,
		Current: st.current(), now: st.now}
	if l := st.lock; l.Held() {
		rep.Holder = l.Job
		if l.Presence {
			rep.HolderPresence = r.readHolder(ctx, l.Job).Status
		}
	}
	i := slices.IndexFunc(st.versions, func(v versionInfo) bool { return !v.At.After(t) })
	if i < 0 {
		oldest := st.versions[len(st.versions)-1]
		return nil, usagef("restore %s: no kept version at or before %s: the oldest is ver %d, written %s: nothing to restore",
			key, stamp(t), oldest.Ver, stamp(oldest.At))
	}
	target := st.versions[i]
	if target.current {
		if target.Corrupt != "" {
			hint := "no older version is kept"
			if len(st.versions) > 1 {
				hint = fmt.Sprintf("pick a time before %s: the newest kept version is ver %d, written %s",
					stamp(target.At), st.versions[1].Ver, stamp(st.versions[1].At))
			}
			return nil, usagef("restore %s: the data as of %s is the current data (ver %d), which does not decode: %s",
				key, stamp(t), target.Ver, hint)
		}
		rep.Target, rep.Outcome = &target, restoreCurrent
		rep.Reason = fmt.Sprintf("the data as of %s is the current data (ver %d, written %s): nothing to restore",
			stamp(t), target.Ver, stamp(target.At))
		return rep, nil
	}
	rep.Target = &target
	if why := schemaRefusal(st, target); why != "" {
		return rep, fmt.Errorf("restore %s: refused: %s; nothing was changed", key, why)
	}
	return rep, restoreVersion(ctx, r, f, st, rep, stderr)
}

// restoreVersion reads the target version as a restore reads it (its size,
// and whether it decodes) through a driver of the CLI's own Node, then
// restores it unless --dry-run, filling rep.
func restoreVersion(ctx context.Context, r *reader, f *restoreFlags, st *restoreState, rep *restoreReport, stderr io.Writer) error {
	key, target := rep.Key, rep.Target
	// A driver that keeps every version there is: the restore keeps one
	// more (the data it replaces) and trims none; the servers' next kept
	// version trims the history to their own History.
	history := min(max(defaults.History, len(st.versions)+1), defaults.MaxHistory)
	natsURL := f.admin.natsServer()
	a, err := openAdmin(ctx, r, &f.read, &f.admin, adminSpec{command: "restore", driver: f.driver, handoff: !f.dryRun,
		natsURL: natsURL, cfg: datadriver.Config[msgpack.RawMessage]{
			Migrations: asIs(st.schema), History: history, Autosave: -1,
			// The restored data was stored once, under the servers' limit.
			MaxDataBytes: maxRestoreBytes,
		}}, stderr)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	defer func() {
		if err := a.close(); err != nil {
			fmt.Fprintf(stderr, "playerdata: warning: closing the restore's Node: %v\n", oneLine(err.Error()))
		}
	}()
	data, err := a.drv.ReadVersion(ctx, key, rep.At)
	if err != nil {
		return fmt.Errorf("restore %s: ver %d cannot be restored: %w; nothing was changed", key, target.Ver, err)
	}
	target.Bytes = len(data)
	if f.dryRun {
		rep.Outcome = restoreWould
		rep.Reason = fmt.Sprintf("restore would make ver %d's data (%d bytes, schema %d) the current data, written as a "+
			"new version, and keep the data it replaces (ver %d) as a version; nothing was changed",
			target.Ver, target.Bytes, target.Schema, rep.Current.Ver)
		if rep.Holder != "" {
			rep.Reason += fmt.Sprintf(". The restore takes the lock like any load, and %s holds it: %s", rep.Holder,
				lockNeeds(rep, natsURL != ""))
		}
		return nil
	}
	wait := f.wait
	switch {
	case !f.waitSet && natsURL != "":
		wait = defaults.LockWait
	case wait == 0:
		wait = -1 // LoadOptions: no wait at all
	}
	p, err := a.drv.RestoreAt(ctx, key, rep.At, datadriver.LoadOptions{HandoffWait: wait})
	if err != nil {
		return restoreErr(key, err, natsURL != "", rep)
	}
	if err := p.Release(ctx); err != nil {
		return fmt.Errorf("restore %s: ver %d is restored, but the release failed (the lock is freed when this "+
			"command's presence expires): %w", key, target.Ver, err)
	}
	after, err := readRestoreState(ctx, r, f.driver, key)
	if err != nil {
		return fmt.Errorf("restore %s: ver %d is restored, but reading the record back failed: %w", key, target.Ver, err)
	}
	rep.Outcome, rep.NewVer = restoreDone, after.ver
	// The restore is one data write: what it replaced is the ver before
	// it, which is the current data read above unless the holder saved as
	// it handed the profile over.
	if i := slices.IndexFunc(after.versions, func(v versionInfo) bool { return v.Ver == after.ver-1 && !v.current }); i >= 0 {
		replaced := after.versions[i]
		if replaced.Ver == st.ver {
			replaced.Bytes, replaced.Corrupt = st.bytes, st.corrupt
		}
		rep.Replaced = &replaced
	}
	rep.Reason = fmt.Sprintf("ver %d's data is the current data again, written as ver %d", target.Ver, rep.NewVer)
	if r := rep.Replaced; r != nil {
		if r.Ver != st.ver && rep.Holder != "" {
			rep.Reason += fmt.Sprintf("; %s saved ver %d as it handed the profile over", rep.Holder, r.Ver)
		}
		rep.Reason += undoText(*r, rep.NewVer, after.at)
	}
	return nil
}

// undoText says how to undo a restore that wrote ver newVer at newAt over
// the version replaced: restore --at its write time, unless both were
// written in one millisecond, which no time tells apart.
func undoText(replaced versionInfo, newVer int64, newAt time.Time) string {
	if replaced.At.Before(newAt) {
		return fmt.Sprintf("; the data it replaced is kept as ver %d (undo: restore --at %s)", replaced.Ver, stamp(replaced.At))
	}
	return fmt.Sprintf("; the data it replaced is kept as ver %d, written in the same millisecond as ver %d "+
		"(no --at tells them apart: restore --at picks ver %d)", replaced.Ver, newVer, newVer)
}

// maxRestoreBytes is the admin driver's MaxDataBytes: Redis's own limit on
// a value.
const maxRestoreBytes = 512<<20 - 1

// restoreErr says why RestoreAt failed, with what the operator can do.
func restoreErr(key string, err error, withNATS bool, rep *restoreReport) error {
	var le *datadriver.LockedError
	switch {
	case errors.Is(err, datadriver.ErrWaitTimeout):
		return fmt.Errorf("restore %s: refused: %w: nothing was changed", key, err)
	case errors.As(err, &le) && !withNATS:
		hint := "give --nats so that " + le.Holder + " hands the profile over (its player is disconnected), or restore once the player has left"
		if rep.HolderPresence == "stopped" || rep.HolderPresence == "unknown" || !le.Presence {
			hint = fmt.Sprintf("%s reads %s: give --wait 30s to wait for it to be proven stopped, or free the lock with "+
				"playerdata unlock", le.Holder, orUnknown(rep.HolderPresence, le.Presence))
		}
		return fmt.Errorf("restore %s: refused: %w: %s; nothing was changed", key, err, hint)
	case errors.As(err, &le):
		return fmt.Errorf("restore %s: refused: %w; nothing was changed", key, err)
	}
	return fmt.Errorf("restore %s: %w", key, err)
}

// lockNeeds says what a restore meets on a lock held by rep.Holder.
func lockNeeds(rep *restoreReport, withNATS bool) string {
	switch {
	case rep.HolderPresence == "alive" && withNATS:
		return "it is asked to save and hand the profile over (its player is disconnected)"
	case rep.HolderPresence == "alive":
		return "without --nats the restore is refused; give --nats so that it hands the profile over"
	case rep.HolderPresence == "stopped":
		return "it stopped beating presence; give --wait 30s so the restore proves it and takes the lock over"
	}
	return "its presence is " + orUnknown(rep.HolderPresence, rep.HolderPresence != "") +
		"; the restore is refused unless the lock frees within --wait"
}

// orUnknown names a holder's presence for a hint.
func orUnknown(status string, flagged bool) string {
	switch {
	case !flagged:
		return "no presence flag (it changes hands by release, or by age after LockTTL+LockSkew)"
	case status == "":
		return "unknown"
	}
	return status
}

// schemaRefusal says why this command must not restore target, or "": the
// CLI knows no migrations, so it restores only data of the record's own
// schema version, which needs none.
func schemaRefusal(st *restoreState, target versionInfo) string {
	if target.Schema != st.schema {
		return fmt.Sprintf("ver %d was written at schema version %d and the record is at %d: restoring it needs the game's "+
			"migrations, which this command does not have; restore it from the game's code (Driver.RestoreAt)",
			target.Ver, target.Schema, st.schema)
	}
	return ""
}

// timeSpec is a parsed --at: a point in time, or an offset from Redis's
// clock.
type timeSpec struct {
	abs time.Time
	rel time.Duration // when abs is zero: now + rel (rel ≤ 0)
}

// resolve is the time spec names, now being Redis's clock.
func (s timeSpec) resolve(now time.Time) time.Time {
	if !s.abs.IsZero() {
		return s.abs
	}
	return now.Add(s.rel)
}

// parseAt parses --at: RFC 3339 (fractions of a second allowed), or a
// negative Go duration ("-2h", "-90m").
func parseAt(s string) (timeSpec, error) {
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return timeSpec{}, fmt.Errorf("not a duration: want RFC 3339 or a look back such as -2h")
		}
		return timeSpec{rel: d}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		if _, derr := time.ParseDuration(s); derr == nil {
			return timeSpec{}, fmt.Errorf("a relative TIME looks back: -%s", strings.TrimPrefix(s, "+"))
		}
		return timeSpec{}, fmt.Errorf("want RFC 3339 (2024-06-10T09:00:00Z) or a look back such as -2h")
	}
	return timeSpec{abs: t}, nil
}

// stamp is t as restore prints it: RFC 3339 in UTC with milliseconds, ready
// to paste into --at.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
