package main

// The presence shard count a deployment uses, found where its servers mark
// it (presencecore.LayoutKey), so that no operator has to know it.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// shardLayout is the shard count the CLI reads presence with, and what it
// is based on.
type shardLayout struct {
	// Shards is the count read with.
	Shards int `json:"shards"`
	// Source says where it came from: "flag" (--presence-shards), "marked"
	// (the one count servers mark in use now), "last-marked" (no mark is
	// live: the count whose mark lapsed last), "several" (servers mark
	// several counts: the largest is read) or "none" (no mark at all: one
	// shard, the default).
	Source string `json:"source"`
	// InUse are the counts whose marks are live, smallest first.
	InUse []int `json:"in_use,omitempty"`
	// Note says it for people when the count is not simply the one in use.
	Note string `json:"note,omitempty"`
}

// layoutMark is one count of the layout hash and the Redis time until
// which a server using it is known to run.
type layoutMark struct {
	count int
	until time.Time
}

// readLayout finds the presence shard count: override when not 0 (the
// flag), else the marks of the layout hash "<presence key>:shards" (read
// with its node's TIME, the clock the marks are written in).
func (r *reader) readLayout(ctx context.Context, override int) (shardLayout, error) {
	if override > 0 {
		return shardLayout{Shards: override, Source: "flag"}, nil
	}
	key := presencecore.LayoutKey(r.presKey)
	node, err := r.nodeOf(ctx, key)
	if err != nil {
		return shardLayout{}, err
	}
	var (
		all   *redis.MapStringStringCmd
		clock *redis.TimeCmd
	)
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, key)
		clock = p.Time(ctx)
		return nil
	}); err != nil {
		return shardLayout{}, fmt.Errorf("read the presence layout %s: %w", key, err)
	}
	var marks []layoutMark
	for f, v := range all.Val() {
		n, err1 := strconv.Atoi(f)
		ms, err2 := strconv.ParseInt(v, 10, 64)
		if err1 == nil && err2 == nil && n >= 1 {
			marks = append(marks, layoutMark{count: n, until: time.UnixMilli(ms)})
		}
	}
	return layoutFrom(key, marks, clock.Val()), nil
}

// layoutFrom decides the count from the marks of the layout hash key, read
// at Redis time now.
func layoutFrom(key string, marks []layoutMark, now time.Time) shardLayout {
	var live []int
	for _, m := range marks {
		if m.until.After(now) {
			live = append(live, m.count)
		}
	}
	slices.Sort(live)
	switch {
	case len(live) == 1:
		return shardLayout{Shards: live[0], Source: "marked", InUse: live}
	case len(live) > 1:
		n := live[len(live)-1]
		return shardLayout{Shards: n, Source: "several", InUse: live,
			Note: fmt.Sprintf("servers of this deployment mark shard counts %v in use in %s: a server of one count beats "+
				"where readers of another do not look; read with %d (--presence-shards picks another)", live, key, n)}
	case len(marks) == 0:
		return shardLayout{Shards: 1, Source: "none",
			Note: fmt.Sprintf("no server has marked a shard count in %s: read as one shard", key)}
	}
	last := slices.MaxFunc(marks, func(a, b layoutMark) int { return cmp.Compare(a.until.UnixMilli(), b.until.UnixMilli()) })
	return shardLayout{Shards: last.count, Source: "last-marked",
		Note: fmt.Sprintf("no server marks a shard count in %s now (the last mark lapsed %s ago): read with %d, the "+
			"count marked last", key, human(now.Sub(last.until).Round(time.Millisecond)), last.count)}
}
