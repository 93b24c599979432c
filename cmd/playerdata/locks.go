package main

// playerdata locks: the locks one server holds, for the operator who must
// decide what a stuck or crashed server leaves behind.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/names"
	"github.com/redis/go-redis/v9"
)

const locksUsage = `Usage: playerdata locks --job ID [flags]

Lists the locks server ID (its NodeConfig.JobID) holds: each record's key,
driver, lock age (Redis clock), presence flag and epoch, and whether the
server beats presence now. The records are found with a bounded SCAN
("SCAN MATCH <namespace>:{<driver>:*} COUNT 1000") that examines about
--limit keys at most, and their lock fields are read in one pipeline per SCAN
batch; the output says when the limit cut the scan short. Reads only.

Flags:
  --job ID             the server's JobID (required)
  --driver NAME        only this driver's records (default: every driver)
  --limit N            examine about N keys at most (default 100000)
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL, to read presence as they do (default 10s)
  --json               print one JSON object

Exit status: 0 listed (none held included), 1 failed, 2 usage, or a namespace
or --driver that holds nothing, or a --job that holds no lock and has no
presence entry (the ones that exist are listed, closest first), whatever
the size of the Redis: a scan cut by --limit says so.
`

// locksReport is what locks shows, and its --json output.
type locksReport struct {
	Namespace   string         `json:"namespace"`
	PresenceKey string         `json:"presence_key"`
	Job         string         `json:"job"`
	Driver      string         `json:"driver,omitempty"`
	Pattern     string         `json:"pattern"`
	Presence    holderPresence `json:"presence"` // the job's presence now
	Locks       []heldLock     `json:"locks"`
	Records     int            `json:"records"`              // records read
	Unreadable  int            `json:"unreadable,omitempty"` // matching keys that are not records
	Scan        scanStats      `json:"scan"`

	holders map[string]bool // the other servers holding the locks read (at most maxHolders)
}

// heldLock is one lock the job holds.
type heldLock struct {
	Key          string  `json:"key"`
	Driver       string  `json:"driver"`
	RecordKey    string  `json:"record_key"`
	TokenPrefix  string  `json:"token_prefix"`
	AgeMS        float64 `json:"age_ms"`
	PresenceFlag bool    `json:"presence_flag"`
	Epoch        int64   `json:"epoch"`
	Trade        string  `json:"trade,omitempty"`
}

// runLocks is "playerdata locks".
func runLocks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("locks", locksUsage)
	var (
		f      readFlags
		job    string
		driver string
		limit  int
	)
	f.add(cmd)
	cmd.fs.StringVar(&job, "job", "", "")
	cmd.fs.StringVar(&driver, "driver", "", "")
	cmd.fs.IntVar(&limit, "limit", defaultScanLimit, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return cmd.mistake("unexpected argument %q", pos[0])
	case job == "":
		return cmd.mistake("--job is required")
	case limit < 1:
		return cmd.mistake("--limit %d: want a number of keys, at least 1", limit)
	}
	if err := f.check(cmd); err != nil {
		return err
	}
	if driver != "" {
		if err := names.Driver(driver); err != nil {
			return usagef("locks: invalid driver name: %w", err)
		}
	}
	r, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := findLocks(ctx, r, job, driver, limit)
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	if rep.Records == 0 && rep.Unreadable == 0 {
		if err := r.checkScope(ctx, driver, limit); err != nil {
			return err
		}
	}
	if len(rep.Locks) == 0 && rep.Presence.Status != "alive" {
		if err := r.checkJob(ctx, job, rep.holders, rep.Scan); err != nil {
			return err
		}
	}
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printLocks(w, st, rep) })
}

// findLocks scans the records of driver (every driver when "") and keeps
// those whose lock job holds, examining about limit keys at most.
func findLocks(ctx context.Context, r *reader, job, driver string, limit int) (*locksReport, error) {
	rep := &locksReport{Namespace: r.ns, PresenceKey: r.presKey, Job: job, Driver: driver,
		Pattern: recordPattern(r.ns, driver), Locks: []heldLock{}, holders: map[string]bool{}}
	st, err := r.scan(ctx, rep.Pattern, limit, func(node redis.Cmdable, keys []string) (bool, error) {
		locks, now, err := readLocks(ctx, node, keys)
		if err != nil {
			return true, err
		}
		for _, l := range locks {
			if l.Err != nil {
				rep.Unreadable++
				continue
			}
			rep.Records++
			if l.Held() && l.Job != job && len(rep.holders) < maxHolders {
				rep.holders[l.Job] = true
			}
			if !l.Held() || l.Job != job {
				continue
			}
			drv, key, _ := parseRecordKey(r.ns, driver, l.RecordKey)
			h := heldLock{Key: key, Driver: drv, RecordKey: l.RecordKey, TokenPrefix: prefix8(l.Token),
				PresenceFlag: l.Presence, Epoch: l.Epoch, Trade: l.Trade}
			if !l.At.IsZero() {
				h.AgeMS = ms(now.Sub(l.At))
			}
			rep.Locks = append(rep.Locks, h)
		}
		return false, nil
	})
	rep.Scan = st
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rep.Locks, func(a, b heldLock) int {
		return cmp.Or(cmp.Compare(a.Driver, b.Driver), cmp.Compare(a.Key, b.Key))
	})
	rep.Presence = r.readHolder(ctx, job)
	return rep, nil
}

// printLocks prints a report for people.
func printLocks(w io.Writer, st style, r *locksReport) {
	scope := "every driver"
	if r.Driver != "" {
		scope = "driver " + r.Driver
	}
	fmt.Fprintf(w, "%s %s in namespace %q, %s\n", st.bold("locks held by"), r.Job, r.Namespace, scope)
	status := r.Presence.String()
	switch r.Presence.Status {
	case "alive":
		status = st.green(status)
	case "stopped":
		status = st.red(status)
	default:
		status = st.yellow(status)
	}
	fmt.Fprintf(w, "  %s is %s in %s\n", r.Job, status, r.PresenceKey)
	if len(r.Locks) > 0 {
		rows := [][]string{{"key", "driver", "lock age", "presence flag", "epoch", "token"}}
		for _, l := range r.Locks {
			row := []string{l.Key, l.Driver, human(time.Duration(l.AgeMS * float64(time.Millisecond))),
				flagText(l.PresenceFlag), strconv.FormatInt(l.Epoch, 10), l.TokenPrefix + "…"}
			if l.Trade != "" {
				row = append(row, "trade "+l.Trade+" pending")
			}
			rows = append(rows, row)
		}
		printTable(w, st, rows)
	}
	fmt.Fprintf(w, "  %d %s held by %s, among %d records read", len(r.Locks), plural(len(r.Locks), "lock", "locks"), r.Job, r.Records)
	if r.Unreadable > 0 {
		fmt.Fprintf(w, " (%d matching keys are not records)", r.Unreadable)
	}
	fmt.Fprintln(w)
	if r.Scan.Cut {
		fmt.Fprintf(w, "  %s\n", st.yellow(fmt.Sprintf("the scan stopped after examining about %d of %d keys (--limit): "+
			"more locks may exist; raise --limit to see them", r.Scan.Examined, r.Scan.DBSize)))
	} else {
		fmt.Fprintf(w, "  the scan examined every key (%d) of %d %s\n", r.Scan.Examined, r.Scan.Masters,
			plural(r.Scan.Masters, "master", "masters"))
	}
}

// flagText is a presence flag as a table shows it.
func flagText(on bool) string {
	if on {
		return "1"
	}
	return "0 (no presence)"
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printTable prints rows (the first one a header) in aligned columns;
// extra cells of a row are printed after the last column.
func printTable(w io.Writer, st style, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i := range min(len(row), len(widths)) {
			widths[i] = max(widths[i], len([]rune(row[i])))
		}
	}
	for n, row := range rows {
		line := "  "
		for i, cell := range row {
			if i < len(widths)-1 {
				cell = pad(cell, widths[i])
			}
			if n == 0 {
				cell = st.bold(cell)
			}
			if i > 0 {
				line += "  "
			}
			line += cell
		}
		fmt.Fprintln(w, line)
	}
}
