package main

// playerdata presence: every server in the presence hash, its last beat
// and whether it reads alive or stopped, as the servers themselves read it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
)

const presenceUsage = `Usage: playerdata presence [flags]

Lists every server in the presence hash "<namespace>:<presence key>"
(CKPresence unless the servers set NodeConfig.PresenceKey; with N shards,
that key and "<key>:{1}" to "<key>:{N-1}", N being the count the servers
mark in "<key>:shards"): the time since its last beat, when that beat
expires (Redis clock), whether it reads alive, stopped or unknown (a missing
beat is no proof yet: the line under the table says why, from the shard's
run mark and Redis's INFO), its session count (profiles held or loading, as
its beat last published it: "-" when it is not alive or publishes none, "?"
with a note under the table when the stored count is unreadable), and the
instance (process) that wrote the beat;
then Redis's maxmemory-policy and memory headroom (a policy that may evict
records is shown in red: Nodes refuse it). Reads only.

Flags:
  --redis URL          Redis, Redis Cluster (any node) or Sentinel (?master_name=M); default
                       $REDIS_URL, else redis://127.0.0.1:6379
  --namespace NS       the servers' NodeConfig.Namespace (default none)
  --presence-key NAME  the servers' NodeConfig.PresenceKey (default CKPresence)
  --presence-shards N  override the shard count the servers mark in "<key>:shards"
  --presence-ttl D     the servers' PresenceTTL: a beat's age is TTL − time left (default 10s)
  --json               print one JSON object

Exit status: 0 listed (an empty hash included), 1 failed, 2 usage, or a
namespace with no records and no servers at all.
`

// presenceReport is what presence shows, and its --json output.
type presenceReport struct {
	Key     string         `json:"key"`    // shard 0 of the hash
	Shards  int            `json:"shards"` // the shard count read with
	Layout  shardLayout    `json:"layout"` // how it was found
	TTLMS   float64        `json:"ttl_ms"`
	Servers []serverReport `json:"servers"`
	Note    string         `json:"note,omitempty"` // e.g. the hash does not exist
	Memory  *memoryReport  `json:"redis_memory"`
}

// serverReport is one server of the presence hash.
type serverReport struct {
	JobID       string  `json:"job"`
	Status      string  `json:"status"`             // alive, stopped, unknown
	Instance    string  `json:"instance,omitempty"` // the process that wrote the beat
	Shard       int     `json:"shard"`
	ExpiresInMS float64 `json:"expires_in_ms"` // negative once expired
	LastBeatMS  float64 `json:"last_beat_ms_ago"`
	// Why says, for an unknown server, why its missing beat proves nothing
	// yet (its shard's run mark against INFO).
	Why string `json:"why,omitempty"`
	// Sessions is the server's session count as its beat published it
	// (presencecore.Entry.Sessions); null when none is known: the server is not
	// alive, publishes none (an older build), or its entry is unreadable.
	Sessions *int `json:"sessions"`
	// SessionsAt is when that count was written (Redis clock, RFC 3339).
	SessionsAt string `json:"sessions_at,omitempty"`
	// SessionsNote says why a live server's stored count was ignored.
	SessionsNote string `json:"sessions_note,omitempty"`
}

// runPresence is "playerdata presence".
func runPresence(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("presence", presenceUsage)
	var f readFlags
	f.add(cmd)
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmd.mistake("unexpected argument %q", pos[0])
	}
	if err := f.check(cmd); err != nil {
		return err
	}
	r, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	rep := presenceReport{Key: r.presKey, Shards: r.layout.Shards, Layout: r.layout, TTLMS: ms(f.presenceTTL),
		Servers: []serverReport{}}
	entries, err := r.pres.List(ctx)
	switch {
	case errors.Is(err, presencecore.ErrShardMismatch):
		// What was read is shown; no entry of a mismatched shard reads stopped.
		rep.Note = err.Error()
	case err != nil:
		return err
	}
	if len(entries) == 0 && rep.Note == "" {
		exists, err := r.presenceHashExists(ctx)
		if err != nil {
			return err
		}
		if !exists {
			if err := r.checkScope(ctx, "", defaultScanLimit); err != nil {
				return err
			}
			rep.Note = "no presence hash: no server has beaten into " + r.presKey +
				" (are --namespace and --presence-key the servers' own?)"
		}
	}
	whys := map[int]string{} // per shard: one read of its run mark
	for _, e := range entries {
		s := serverReport{JobID: e.JobID, Status: e.Status.String(), Instance: e.Instance, Shard: e.Shard,
			ExpiresInMS: ms(e.ExpiresIn), LastBeatMS: ms(f.presenceTTL - e.ExpiresIn)}
		if !e.SessionsAt.IsZero() {
			n := e.Sessions
			s.Sessions, s.SessionsAt = &n, e.SessionsAt.UTC().Format(time.RFC3339Nano)
		}
		if e.SessionsErr != nil {
			s.SessionsNote = e.SessionsErr.Error() + " (ignored)"
		}
		if e.Status == presencecore.Unknown && !errors.Is(err, presencecore.ErrShardMismatch) {
			if _, ok := whys[e.Shard]; !ok {
				whys[e.Shard] = r.readRunEvidence(ctx, presencecore.ShardKey(r.presKey, e.Shard)).why(r.ttl)
			}
			s.Why = whys[e.Shard]
		}
		rep.Servers = append(rep.Servers, s)
	}
	rep.Memory = r.readMemory(ctx)
	return emit(stdout, f.json, rep, func(w io.Writer, st style) { printPresence(w, st, rep, f.presenceTTL) })
}

// printPresence prints a report for people.
func printPresence(w io.Writer, st style, r presenceReport, ttl time.Duration) {
	shards := ""
	if r.Shards > 1 {
		shards = fmt.Sprintf(", %d shards", r.Shards)
	}
	fmt.Fprintf(w, "%s %s (PresenceTTL %s%s)\n", st.bold("presence hash"), r.Key, human(ttl), shards)
	if r.Layout.Note != "" {
		fmt.Fprintln(w, "  "+st.yellow(r.Layout.Note))
	}
	if r.Note != "" {
		fmt.Fprintln(w, "  "+st.yellow(r.Note))
	}
	printMemory(w, st, r.Memory)
	if len(r.Servers) == 0 {
		if r.Note == "" {
			fmt.Fprintln(w, "  no server in the presence hash")
		}
		return
	}
	width := len("server")
	for _, s := range r.Servers {
		width = max(width, len(s.JobID))
	}
	fmt.Fprintf(w, "  %s  %s  %s  %s  %s  %s\n", st.bold(pad("server", width)), st.bold(pad("status", 7)),
		st.bold(pad("sessions", 8)), st.bold(pad("last beat", 12)), st.bold(pad("beat expires", 14)), st.bold("instance"))
	var whys, notes []string
	for _, s := range r.Servers {
		status := pad(s.Status, 7)
		switch s.Status {
		case "alive":
			status = st.green(status)
		case "stopped":
			status = st.red(status)
		default:
			status = st.yellow(status)
			if s.Why != "" && !slices.Contains(whys, s.Why) {
				whys = append(whys, s.Why)
			}
		}
		left := time.Duration(s.ExpiresInMS * float64(time.Millisecond))
		expires := "in " + human(left)
		if left <= 0 {
			expires = human(-left) + " ago"
		}
		last := human(time.Duration(s.LastBeatMS*float64(time.Millisecond))) + " ago"
		inst := s.Instance
		if r.Shards > 1 {
			inst += fmt.Sprintf(" (shard %d)", s.Shard)
		}
		sessions := "-" // not alive, or publishes no count
		switch {
		case s.Sessions != nil:
			sessions = strconv.Itoa(*s.Sessions)
		case s.SessionsNote != "":
			sessions = "?"
			notes = append(notes, s.SessionsNote)
		}
		fmt.Fprintf(w, "  %s  %s  %s  %s  %s  %s\n", pad(s.JobID, width), status, pad(sessions, 8), pad(last, 12),
			pad(expires, 14), inst)
	}
	for _, why := range whys {
		fmt.Fprintln(w, "  unknown: "+wrapText(why, 90, "    "))
	}
	for _, note := range notes {
		fmt.Fprintln(w, "  "+st.yellow("sessions: "+wrapText(note, 90, "    ")))
	}
}

// pad pads s with spaces to n runes.
func pad(s string, n int) string {
	if k := len([]rune(s)); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}
