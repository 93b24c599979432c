package presencecore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/rscript"
)

// Read answers whether jobID's presence beat is live, judged on the Redis
// clock: Alive with the time left, Stopped, or Unknown (with Err set when the
// read failed or found another shard count in use, nil when Redis restarted
// or failed over less than one TTL ago). It reads the shard ShardOf(jobID)
// names: one Lua script round trip, bounded by ctx. Before a Stopped answer
// it makes sure no server runs with another shard count (which would beat
// where this reader does not look): one more round trip to the layout hash
// (see LayoutKey). Unlike IsAlive it reads our own JobID from Redis too. An
// invalid jobID reads Unknown with an Err wrapping ErrInvalidJobID. A missing
// beat reads Unknown for one TTL after the shard's Redis clock was seen to
// jump ahead of this reader's (see clockwatch.go), rather than Stopped on a
// clock that stepped.
func (p *Presence) Read(ctx context.Context, jobID string) Reading {
	if err := checkJobID(jobID); err != nil {
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read: %w", err)}
	}
	s := p.shardOf(jobID)
	sent := p.clock.Now()
	ans, err := presencescript.Read.Run(ctx, p.rdb, s.key, presencescript.ReadArgs{JobID: jobID, TTL: p.cfg.TTL})
	if err != nil {
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read %s: %w", jobID, err)}
	}
	p.watchClock(s.key, sent, p.clock.Now(), ans.Now.UnixMilli())
	return p.afterStep(s.key, p.judge(ctx, jobID, ans))
}

// judge turns read.lua's answer for jobID into a Reading.
func (p *Presence) judge(ctx context.Context, jobID string, ans presencescript.ReadAnswer) Reading {
	at := ans.Now
	switch ans.Outcome {
	case presencescript.ReadAlive:
		return p.clampAhead(ctx, jobID, Reading{Status: Alive, ExpiresIn: ans.Left, At: at}, at.Add(ans.Left).UnixMilli())
	case presencescript.ReadStopped:
		if err := p.checkLayout(ctx); err != nil {
			return Reading{Status: Unknown, At: at, Err: fmt.Errorf("presence read %s: %w", jobID, err)}
		}
		r := Reading{Status: Stopped, At: at}
		if ans.Left >= 0 { // how long ago its last beat expired; negative: none left
			r.LastBeat = at.Add(-ans.Left - p.cfg.TTL)
		}
		return r
	default:
		return Reading{Status: Unknown, ExpiresIn: ans.Left, At: at}
	}
}

// aheadState is what a reader remembers of a beat further ahead than one
// TTL: its expiry (ms, Redis clock) and when it was first seen so (local
// clock).
type aheadState struct {
	expiry int64
	since  time.Time
}

// clampAhead bounds what a beat stamped further ahead than one TTL can hold
// off: a live server writes its field every Beat, each time Redis TIME +
// TTL, so a field further ahead was written before a backward step of the
// Redis clock, and says nothing of when its server last beat. It counts as
// expiring one TTL after it was first seen so: until then Alive with at
// most TTL left, then, if the field still holds that very value (no beat
// landed for a whole TTL of this reader's clock), Stopped, after the same
// layout check as a missing beat. A backward step of the Redis clock thus
// delays a takeover by at most one TTL, however large.
func (p *Presence) clampAhead(ctx context.Context, jobID string, r Reading, expiry int64) Reading {
	p.mu.Lock()
	if r.ExpiresIn <= p.cfg.TTL {
		delete(p.ahead, jobID)
		p.mu.Unlock()
		return r
	}
	now := p.clock.Now()
	a, ok := p.ahead[jobID]
	if !ok || a.expiry != expiry {
		a = aheadState{expiry: expiry, since: now}
		p.ahead[jobID] = a
		for job, o := range p.ahead { // bounded memory: forget what nobody read for a while
			if now.Sub(o.since) > 4*p.cfg.TTL {
				delete(p.ahead, job)
			}
		}
	}
	p.mu.Unlock()
	if left := p.cfg.TTL - now.Sub(a.since); left > 0 {
		r.ExpiresIn = left
		return r
	}
	if err := p.checkLayout(ctx); err != nil {
		return Reading{Status: Unknown, At: r.At, Err: fmt.Errorf("presence read %s: %w", jobID, err)}
	}
	return Reading{Status: Stopped, At: r.At}
}

// checkLayout is the look before a Stopped answer: an error wrapping
// ErrShardMismatch when a server may run with another shard count, or the
// read's own error.
func (p *Presence) checkLayout(ctx context.Context) error {
	others, _, err := p.shardCounts(ctx, false)
	if err != nil {
		return err
	}
	if others != nil {
		return fmt.Errorf("%w: this reader uses %d shards, servers of this deployment use %v", ErrShardMismatch, len(p.shards), others)
	}
	return nil
}

// IsAlive is Read(ctx, jobID).Status, except that our own JobID is always
// Alive without a round trip (whether we are stale is Lease's question).
func (p *Presence) IsAlive(ctx context.Context, jobID string) Status {
	if jobID == p.cfg.JobID {
		return Alive
	}
	return p.Read(ctx, jobID).Status
}

// List returns every server in every shard of the hash, sorted by JobID,
// with the time until its beat expires (negative once expired), the Status
// Read would give, its instance and its shard. It reads every shard in one
// pipeline of script calls (O(servers)), then the layout hash: meant for an
// operator's CLI, not for hot paths. When servers of the deployment use
// another shard count than Config.Shards, List returns what it read, with
// no entry Stopped, together with an error wrapping ErrShardMismatch. Other
// errors are wrapped "presence list: ..." and come with no entries.
func (p *Presence) List(ctx context.Context) ([]Entry, error) {
	pending := make([]rscript.Pending[presencescript.ListAnswer], len(p.shards))
	calls := make([]rscript.Call, len(p.shards))
	for i, s := range p.shards {
		pending[i] = presencescript.List.Call(s.key, presencescript.ListArgs{Owners: s.owners, Load: s.load, TTL: p.cfg.TTL})
		calls[i] = pending[i].Call
	}
	vals, errs := rscript.Run(ctx, p.rdb, calls)
	entries := []Entry{}
	for i := range vals {
		a, err := pending[i].Answer(vals[i], errs[i])
		if err != nil {
			return nil, fmt.Errorf("presence list: %w", err)
		}
		entries = append(entries, listEntries(a, i, p.shards[i].load)...)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.JobID, b.JobID) })
	others, _, err := p.shardCounts(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("presence list: %w", err)
	}
	if others != nil {
		for i := range entries {
			if entries[i].Status == Stopped {
				entries[i].Status = Unknown
			}
		}
		return entries, fmt.Errorf("presence list: %w: this reader uses %d shards, servers of this deployment use %v",
			ErrShardMismatch, len(p.shards), others)
	}
	return entries, nil
}

// listEntries are the entries of list.lua's answer a for shard n, whose
// load hash is loadKey.
func listEntries(a presencescript.ListAnswer, n int, loadKey string) []Entry {
	entries := make([]Entry, 0, len(a.Rows))
	for _, r := range a.Rows {
		e := Entry{JobID: r.JobID, ExpiresIn: r.Left, Instance: r.Instance, Shard: n}
		switch {
		case r.Left > 0:
			e.Status = Alive
		case a.Proof:
			e.Status = Stopped
		default:
			e.Status = Unknown
		}
		e.setLoad(r.Load, a.LoadErr, loadKey)
		entries = append(entries, e)
	}
	return entries
}
