package presence

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Read answers whether jobID's presence beat is live, judged on the Redis
// clock: Alive with the time left, Stopped, or Unknown (with Err set when the
// read failed, nil when Redis restarted or failed over less than one TTL ago).
// One Lua script round trip, bounded by ctx. Unlike IsAlive it reads our own
// JobID from Redis too. An invalid jobID reads Unknown with an Err wrapping
// ErrInvalidJobID.
func (p *Presence) Read(ctx context.Context, jobID string) Reading {
	if err := checkJobID(jobID); err != nil {
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read: %w", err)}
	}
	res, err := readScript.Run(ctx, p.rdb, []string{p.cfg.Key}, jobID, p.ttlMS).Int64Slice()
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
		return Reading{Status: Stopped, At: at}
	case 0:
		return Reading{Status: Unknown, ExpiresIn: ms, At: at}
	default:
		return Reading{Status: Unknown, Err: fmt.Errorf("presence read %s: %w: code %d", jobID, ErrUnexpectedReply, res[0])}
	}
}

// IsAlive is Read(ctx, jobID).Status, except that our own JobID is always
// Alive without a round trip (whether we are stale is Stale's question).
func (p *Presence) IsAlive(ctx context.Context, jobID string) Status {
	if jobID == p.cfg.JobID {
		return Alive
	}
	return p.Read(ctx, jobID).Status
}

// List returns every server in the hash, sorted by JobID, with the time until
// its beat expires (negative once expired) and the Status Read would give. It
// reads the whole hash in one script round trip (O(servers)): meant for an
// operator's CLI, not for hot paths. Errors are wrapped "presence list: ...".
func (p *Presence) List(ctx context.Context) ([]Entry, error) {
	res, err := listScript.Run(ctx, p.rdb, []string{p.cfg.Key}, p.ttlMS).Slice()
	if err != nil {
		return nil, fmt.Errorf("presence list: %w", err)
	}
	if len(res) < 2 || len(res)%2 != 0 {
		return nil, fmt.Errorf("presence list: %w: %d elements", ErrUnexpectedReply, len(res))
	}
	proof, ok := res[0].(int64)
	if !ok {
		return nil, fmt.Errorf("presence list: %w: proof %T", ErrUnexpectedReply, res[0])
	}
	entries := make([]Entry, 0, (len(res)-2)/2)
	for i := 2; i < len(res); i += 2 {
		job, ok1 := res[i].(string)
		ms, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("presence list: %w: entry %T %T", ErrUnexpectedReply, res[i], res[i+1])
		}
		e := Entry{JobID: job, ExpiresIn: time.Duration(ms) * time.Millisecond}
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
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.JobID, b.JobID) })
	return entries, nil
}
