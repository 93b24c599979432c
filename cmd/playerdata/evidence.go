package main

// Why a presence reading is unknown, from what Redis says: the run mark of
// the shard (presencecore.MetaRun and MetaSince) against INFO's run_id, uptime
// and replication ids. A reading is unknown when a missing beat proves
// nothing yet; the reason is printed only when these reads back it.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/redis/go-redis/v9"
)

// runEvidence is what the shard and its Redis said.
type runEvidence struct {
	Shard     string
	Exists    bool          // the shard hash exists
	MarkRun   string        // the run the mark names
	MarkAge   time.Duration // Redis now − the mark's since; 0 when unmarked
	Marked    bool          // both mark fields are set
	RunID     string        // INFO server run_id
	Uptime    time.Duration // INFO server uptime_in_seconds
	Promoted  bool          // INFO replication master_replid2 set: was a replica once
	ReadError string        // the reads failed
}

// readRunEvidence reads the run mark of shard and its node's INFO server
// and replication, in one pipeline on that node.
func (r *reader) readRunEvidence(ctx context.Context, shard string) runEvidence {
	ev := runEvidence{Shard: shard}
	node, err := r.nodeOf(ctx, shard)
	if err != nil {
		ev.ReadError = err.Error()
		return ev
	}
	var (
		exists      *redis.IntCmd
		mark        *redis.SliceCmd
		clock       *redis.TimeCmd
		server, rep *redis.StringCmd
	)
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, shard)
		mark = p.HMGet(ctx, shard, presencecore.MetaRun, presencecore.MetaSince)
		clock = p.Time(ctx)
		server = p.Info(ctx, "server")
		rep = p.Info(ctx, "replication")
		return nil
	}); err != nil && (exists.Err() != nil || clock.Err() != nil) {
		ev.ReadError = err.Error()
		return ev
	}
	ev.Exists = exists.Val() > 0
	vals := mark.Val()
	run, _ := vals[0].(string)
	since, _ := vals[1].(string)
	if ms, err := strconv.ParseInt(since, 10, 64); err == nil && vals[0] != nil {
		ev.Marked, ev.MarkRun = true, run
		ev.MarkAge = clock.Val().Sub(time.UnixMilli(ms))
	}
	ev.RunID = infoField(server.Val(), "run_id")
	if s, err := strconv.ParseInt(infoField(server.Val(), "uptime_in_seconds"), 10, 64); err == nil {
		ev.Uptime = time.Duration(s) * time.Second
	}
	id2 := infoField(rep.Val(), "master_replid2")
	ev.Promoted = id2 != "" && strings.Trim(id2, "0") != ""
	return ev
}

// why says in one sentence why a missing beat in the shard proves nothing
// yet, from what was read, for a reader with PresenceTTL ttl.
func (ev runEvidence) why(ttl time.Duration) string {
	switch {
	case ev.ReadError != "":
		return "the run mark of " + ev.Shard + " could not be read (" + ev.ReadError + ")"
	case !ev.Exists:
		return "the presence hash " + ev.Shard + " does not exist: no server beats into it"
	case !ev.Marked:
		return ev.Shard + " has no run mark (\\0run, \\0since): no server has beaten into it with a check since its mark was lost"
	case ev.RunID != "" && ev.MarkRun != ev.RunID:
		return fmt.Sprintf("the run mark of %s names Redis process %s…, but this Redis is %s… (up %s): Redis restarted or "+
			"failed over since a server last marked the hash", ev.Shard, prefix8(ev.MarkRun), prefix8(ev.RunID), human(ev.Uptime))
	case ev.RunID == "":
		return fmt.Sprintf("%s was first beaten into %s ago, and this Redis reports no run id to tell a restart by",
			ev.Shard, human(ev.MarkAge.Round(time.Millisecond)))
	case ev.Uptime < ttl+time.Second:
		return fmt.Sprintf("Redis started %s ago (INFO uptime_in_seconds) and %s was first beaten into %s ago: a missing "+
			"beat proves nothing until one PresenceTTL (%s) after the first beat", human(ev.Uptime), ev.Shard,
			human(ev.MarkAge.Round(time.Millisecond)), human(ttl))
	}
	s := fmt.Sprintf("the first beat into %s under this Redis process (%s…, up %s) was %s ago, less than one "+
		"PresenceTTL (%s): ", ev.Shard, prefix8(ev.RunID), human(ev.Uptime), human(ev.MarkAge.Round(time.Millisecond)), human(ttl))
	if ev.Promoted {
		return s + "a new deployment or namespace, a hash that was deleted, or a failover to this node (it was a replica once)"
	}
	return s + "a new deployment or namespace, or a hash that was deleted (Redis did not restart, and this node was never a replica)"
}
