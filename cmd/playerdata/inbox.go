package main

// A profile's inbox as inspect and send show it: the messages sent to it
// (Driver.Send) that no server has applied and saved yet.

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
)

// inboxReport is the inbox of one record, and its --json output.
type inboxReport struct {
	// Count is how many messages wait.
	Count int64 `json:"count"`
	// OldestID and OldestAt name the oldest waiting message and when it was
	// sent (Redis clock); OldestAgeMS is its age when read.
	OldestID    string     `json:"oldest_id,omitempty"`
	OldestAt    *time.Time `json:"oldest_at,omitempty"`
	OldestAgeMS *float64   `json:"oldest_age_ms,omitempty"`
}

// readInbox reads the inbox of the record at rk, "<rk>:inbox": XLEN and
// XRANGE - + COUNT 1 in one pipeline (reads only). now is Redis's clock, for
// the oldest message's age.
func readInbox(ctx context.Context, rdb redis.Cmdable, rk string, now time.Time) (*inboxReport, error) {
	ik := record.InboxKey(rk)
	var (
		n      *redis.IntCmd
		oldest *redis.XMessageSliceCmd
	)
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.XLen(ctx, ik)
		oldest = p.XRangeN(ctx, ik, "-", "+", 1)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the inbox %s: %w", ik, err)
	}
	rep := &inboxReport{Count: n.Val()}
	if msgs := oldest.Val(); len(msgs) > 0 {
		rep.OldestID = msgs[0].ID
		if at := (record.Message{ID: msgs[0].ID}).At(); !at.IsZero() {
			age := ms(now.Sub(at))
			rep.OldestAt, rep.OldestAgeMS = &at, &age
		}
	}
	return rep, nil
}

// String says it for people: "2 messages wait, the oldest 1718…-0, sent
// 2024-06-10 09:00:00.000 (3.20 s ago)".
func (r *inboxReport) String() string {
	if r.Count == 0 {
		return "empty"
	}
	s := fmt.Sprintf("%d %s", r.Count, plural(int(r.Count), "message waits", "messages wait"))
	if r.OldestID == "" {
		return s
	}
	s += ", the oldest " + r.OldestID
	if r.OldestAt != nil {
		s += fmt.Sprintf(", sent %s (%s ago)", r.OldestAt.Local().Format("2006-01-02 15:04:05.000"),
			human(msDuration(*r.OldestAgeMS).Round(time.Millisecond)))
	}
	return s
}
