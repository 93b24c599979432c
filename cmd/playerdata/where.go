package main

// playerdata where: which server holds a player, since when, and whether
// that server is alive now, one sentence per key.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ckernel/playerdata/internal/names"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
)

const whereUsage = `Usage: playerdata where --driver NAME [flags] KEY...

Says, for each KEY, which server holds its session lock (its JobID), since
when (the Redis-clock time that server's session took the lock), and whether
that server is alive now (its presence beat, read as the servers read it):
one sentence per key. A holder read as stopped is taken over by the key's
next join. Reads only: one read of each record's lock fields, and one
presence read per holder. Driver.Where is the same question from a server.

Flags:
  --driver NAME        the profile kind (its Config.Name; required)
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL, to read presence as they do (default 10s)
  --json               print one JSON object

Exit status: 0 answered for every key (held or not, with a record or not), 1
a record could not be read (the others are answered), 2 usage, or a
namespace or --driver that holds nothing.
`

// whereReport is what where shows, and its --json output.
type whereReport struct {
	Namespace   string     `json:"namespace"`
	PresenceKey string     `json:"presence_key"`
	Driver      string     `json:"driver"`
	Keys        []whereKey `json:"keys"`
}

// whereKey is where one key is held.
type whereKey struct {
	Key       string `json:"key"`
	RecordKey string `json:"record_key"`
	Exists    bool   `json:"exists"`
	Job       string `json:"job,omitempty"` // "" when nobody holds it
	// Since is when the holder's session took the lock (RFC 3339, Redis
	// clock); "" when not held, or not known (SinceUnknown: taken by a
	// build from before it was stamped).
	Since        string          `json:"since,omitempty"`
	SinceUnknown bool            `json:"since_unknown,omitempty"`
	HeldForMS    float64         `json:"held_for_ms,omitempty"`
	Epoch        int64           `json:"epoch"`
	PresenceFlag bool            `json:"presence_flag,omitempty"`
	Presence     *holderPresence `json:"presence,omitempty"` // the holder's presence now
	Error        string          `json:"error,omitempty"`    // the record could not be read
}

// runWhere is "playerdata where".
func runWhere(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("where", whereUsage)
	var (
		f      readFlags
		driver string
	)
	f.add(cmd)
	cmd.fs.StringVar(&driver, "driver", "", "")
	keys, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case driver == "":
		return cmd.mistake("--driver is required")
	case len(keys) == 0:
		return cmd.mistake("at least one profile KEY is required")
	}
	if err := f.check(cmd); err != nil {
		return err
	}
	if err := names.Driver(driver); err != nil {
		return cmd.mistake("--driver: invalid driver name: %s", err)
	}
	for _, k := range keys {
		if err := names.Key(k); err != nil {
			return cmd.mistake("KEY %q: invalid profile key: %s", k, err)
		}
	}
	r, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	rep := &whereReport{Namespace: r.ns, PresenceKey: r.presKey, Driver: driver, Keys: make([]whereKey, 0, len(keys))}
	var failed error
	anyRecord := false
	for _, k := range keys {
		wk, err := r.where(ctx, driver, k)
		if err != nil {
			return fmt.Errorf("where %s: %w", k, err)
		}
		if wk.Error != "" && failed == nil {
			failed = fmt.Errorf("where %s: %s", k, wk.Error)
		}
		anyRecord = anyRecord || wk.Exists || wk.Error != ""
		rep.Keys = append(rep.Keys, wk)
	}
	if !anyRecord {
		if err := r.checkScope(ctx, driver, defaultScanLimit); err != nil {
			return err
		}
	}
	if err := emit(stdout, f.json, rep, func(w io.Writer, st style) { printWhere(w, st, rep) }); err != nil {
		return err
	}
	return failed
}

// where reads where driver/key is held; an error only when Redis could not
// be read at all (a record that is not one is reported in whereKey.Error).
func (r *reader) where(ctx context.Context, driver, key string) (whereKey, error) {
	rk := record.Key(r.ns, driver, key)
	wk := whereKey{Key: key, RecordKey: rk}
	l, now, err := r.readLock(ctx, rk)
	if err != nil {
		return wk, err
	}
	if l.Err != nil {
		wk.Error = "its record is not a hash: " + l.Err.Error()
		return wk, nil
	}
	wk.Exists, wk.Epoch = l.Exists, l.Epoch
	if !l.Held() {
		return wk, nil
	}
	if l.Job == "" {
		wk.Error = "its lock names no holder (lock.job is empty): playerdata repair --force mends it"
		return wk, nil
	}
	wk.Job, wk.PresenceFlag = l.Job, l.Presence
	if l.Since.IsZero() {
		wk.SinceUnknown = true
	} else {
		wk.Since = l.Since.UTC().Format(time.RFC3339Nano)
		wk.HeldForMS = ms(max(now.Sub(l.Since), 0))
	}
	h := r.readHolder(ctx, l.Job)
	wk.Presence = &h
	return wk, nil
}

// printWhere prints one sentence per key, for people.
func printWhere(w io.Writer, st style, rep *whereReport) {
	for _, k := range rep.Keys {
		fmt.Fprintln(w, whereSentence(st, rep, k))
	}
}

// whereSentence says where one key is held, in one sentence.
func whereSentence(st style, rep *whereReport, k whereKey) string {
	switch {
	case k.Error != "":
		return fmt.Sprintf("%s: %s.", k.Key, st.red(k.Error))
	case !k.Exists:
		return fmt.Sprintf("%s has no record of driver %s in namespace %q: it was never joined, and nobody holds it.",
			k.Key, rep.Driver, rep.Namespace)
	case k.Job == "":
		return fmt.Sprintf("%s is held by no server: the next join takes it at once (epoch %d).", k.Key, k.Epoch)
	}
	since := "since a time this record does not say (the lock was taken by a build from before it was recorded)"
	if !k.SinceUnknown {
		at, _ := time.Parse(time.RFC3339Nano, k.Since)
		since = fmt.Sprintf("since %s (%s ago)", at.Format("2006-01-02 15:04:05.000 MST"),
			human(time.Duration(k.HeldForMS*float64(time.Millisecond))))
	}
	status := k.Presence.String()
	next := ""
	switch k.Presence.reading.Status {
	case presencecore.Alive:
		status = st.green(status)
	case presencecore.Stopped:
		status = st.red(status)
		next = ": the next join takes the lock over at once"
	default:
		status = st.yellow(status)
	}
	if !k.PresenceFlag {
		next = "; the lock carries no presence flag, so it goes only by age (LockTTL + LockSkew after its holder's last write)"
	}
	return fmt.Sprintf("%s is held by %s %s, epoch %d; %s is %s%s.", k.Key, k.Job, since, k.Epoch, k.Job, status, next)
}
