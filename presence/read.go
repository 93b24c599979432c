package presence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/redis/go-redis/v9"
)

// Read answers whether jobID's presence beat is live, judged on the Redis
// clock: Alive with the time left, Stopped, or Unknown (with Err set when the
// read failed or found another shard count in use, nil when Redis restarted
// or failed over less than one TTL ago). It reads the shard ShardOf(jobID)
// names; one Lua script round trip, bounded by ctx, and with several shards
// a second one (one HGET of shard 0) before any Stopped answer, so that a
// server left at another count (the default 1, whose only hash is shard 0)
// is not read as stopped. Unlike IsAlive it reads our own JobID from Redis
// too. An invalid jobID reads Unknown with an Err wrapping ErrInvalidJobID.
func (p *Presence) Read(ctx context.Context, jobID string) Reading {
	if err := checkJobID(jobID); err != nil {
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read: %w", err)}
	}
	s := p.shardOf(jobID)
	res, err := readScript.Run(ctx, p.rdb, []string{s.key, s.owners}, jobID, p.ttlMS, len(p.shards)).Int64Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("%w: %v", ErrUnexpectedReply, res)
	}
	if err != nil {
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read %s: %w", jobID, err)}
	}
	ms := time.Duration(res[1]) * time.Millisecond
	at := time.UnixMilli(res[2])
	switch res[0] {
	case 1:
		return Reading{Status: Alive, ExpiresIn: ms, At: at}
	case 2:
		if s.key != p.shards[0].key {
			if err := p.checkShardZero(ctx, jobID, res[2]); err != nil {
				return Reading{Status: Unknown, Err: fmt.Errorf("presence read %s: %w", jobID, err)}
			}
		}
		return Reading{Status: Stopped, At: at}
	case 0:
		return Reading{Status: Unknown, ExpiresIn: ms, At: at}
	case 3:
		return Reading{Status: Unknown, At: at, Err: fmt.Errorf("presence read %s: %w: this reader uses %d shards, servers beating into %s use %d",
			jobID, ErrShardMismatch, len(p.shards), s.key, res[1])}
	default:
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read %s: %w: code %d", jobID, ErrUnexpectedReply, res[0])}
	}
}

// checkShardZero is the second look before a Stopped answer with several
// shards: a live beat of jobID in shard 0, where a server whose count is 1
// beats, means that server uses another count. nowMS is the Redis time of
// the first read.
func (p *Presence) checkShardZero(ctx context.Context, jobID string, nowMS int64) error {
	v, err := p.rdb.HGet(ctx, p.shards[0].key, jobID).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		return err
	}
	if exp, perr := strconv.ParseInt(v, 10, 64); perr == nil && exp > nowMS {
		return fmt.Errorf("%w: it beats into %s, not into its shard %s of %d",
			ErrShardMismatch, p.shards[0].key, p.KeyOf(jobID), len(p.shards))
	}
	return nil
}

// IsAlive is Read(ctx, jobID).Status, except that our own JobID is always
// Alive without a round trip (whether we are stale is Stale's question).
func (p *Presence) IsAlive(ctx context.Context, jobID string) Status {
	if jobID == p.cfg.JobID {
		return Alive
	}
	return p.Read(ctx, jobID).Status
}

// List returns every server in every shard of the hash, sorted by JobID,
// with the time until its beat expires (negative once expired), the Status
// Read would give, its instance and its shard. It reads every shard in one
// pipeline of script calls (O(servers)): meant for an operator's CLI, not
// for hot paths. When a shard is marked with another shard count than
// Config.Shards, List returns what it read together with an error wrapping
// ErrShardMismatch, and no entry of that shard reads Stopped. Other errors
// are wrapped "presence list: ..." and come with no entries.
func (p *Presence) List(ctx context.Context) ([]Entry, error) {
	calls := make([]rscript.Call, len(p.shards))
	for i, s := range p.shards {
		calls[i] = rscript.Call{Script: listScript, Keys: []string{s.key, s.owners}, Args: []any{p.ttlMS, len(p.shards)}}
	}
	vals, errs := rscript.Run(ctx, p.rdb, calls)
	var entries []Entry
	var mismatch []string
	for i, v := range vals {
		if errs[i] != nil {
			return nil, fmt.Errorf("presence list: %w", errs[i])
		}
		got, seen, err := parseList(v, i)
		if err != nil {
			return nil, fmt.Errorf("presence list: %w", err)
		}
		if seen != 0 {
			mismatch = append(mismatch, fmt.Sprintf("%s is marked %d", p.shards[i].key, seen))
		}
		entries = append(entries, got...)
	}
	if entries == nil {
		entries = []Entry{}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.JobID, b.JobID) })
	if mismatch != nil {
		return entries, fmt.Errorf("presence list: %w: this reader uses %d shards; %s",
			ErrShardMismatch, len(p.shards), strings.Join(mismatch, ", "))
	}
	return entries, nil
}

// parseList reads list.lua's answer for shard n: its entries and the count
// of a live marker that is not ours (0: none).
func parseList(v any, n int) ([]Entry, int, error) {
	res, ok := v.([]any)
	if !ok || len(res) < 3 || (len(res)-3)%3 != 0 {
		return nil, 0, fmt.Errorf("%w: %v", ErrUnexpectedReply, v)
	}
	proof, ok1 := res[0].(int64)
	seen, ok2 := res[2].(int64)
	if !ok1 || !ok2 {
		return nil, 0, fmt.Errorf("%w: header %T %T", ErrUnexpectedReply, res[0], res[2])
	}
	entries := make([]Entry, 0, (len(res)-3)/3)
	for i := 3; i < len(res); i += 3 {
		job, ok1 := res[i].(string)
		ms, ok2 := res[i+1].(int64)
		inst, ok3 := res[i+2].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, 0, fmt.Errorf("%w: entry %T %T %T", ErrUnexpectedReply, res[i], res[i+1], res[i+2])
		}
		e := Entry{JobID: job, ExpiresIn: time.Duration(ms) * time.Millisecond, Instance: inst, Shard: n}
		switch {
		case ms > 0:
			e.Status = Alive
		case proof == 1:
			e.Status = Stopped
		default:
			e.Status = Unknown
		}
		entries = append(entries, e)
	}
	return entries, int(seen), nil
}
