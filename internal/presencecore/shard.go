package presencecore

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
)

// ShardOf returns the shard (0 to shards-1) that jobID beats into: FNV-1a
// (32 bits) of the JobID modulo shards. It never changes for a JobID and a
// count, so every server and reader agrees on it; shards < 2 gives 0.
func ShardOf(jobID string, shards int) int {
	if shards < 2 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(jobID))
	return int(h.Sum32() % uint32(shards))
}

// ShardKey returns the Redis key of shard n of the presence hash key: key
// itself for shard 0 (so a single-shard deployment keeps the key it always
// had, and shard 0 of every count is the same hash), "<key>:{<n>}" for the
// others. The hash tag puts each shard in a Redis Cluster slot of its own.
func ShardKey(key string, n int) string {
	if n == 0 {
		return key
	}
	return key + ":{" + strconv.Itoa(n) + "}"
}

// OwnersKey returns the key of the owners hash beside the shard hash
// shardKey: which instance wrote each JobID's beat, and the shard-count
// marker. It shares shardKey's Cluster slot: "<shardKey>:owners" when
// shardKey has a hash tag, else "<shardKey>:{<shardKey>}:owners" (whose tag
// is the whole of shardKey, which Redis hashes alike).
func OwnersKey(shardKey string) string {
	if _, ok := hashTag(shardKey); ok {
		return shardKey + ":owners"
	}
	return shardKey + ":{" + shardKey + "}:owners"
}

// hashTag returns the Redis Cluster hash tag of key (the text between its
// first "{" and the next "}", when not empty) and whether it has one.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return "", false
	}
	return key[open+1 : open+1+n], true
}

// checkKey refuses a presence Key whose shards or owners hash would not
// land where they must: with several shards the key may have no braces (its
// tag would pin every shard to one slot); with one, braces must form a hash
// tag (a lone or empty one would hash the owners hash elsewhere).
func checkKey(key string, shards int) error {
	if !strings.ContainsAny(key, "{}") {
		return nil
	}
	if shards > 1 {
		return fmt.Errorf("the Key %q has braces: with %d shards each shard needs a hash tag of its own", key, shards)
	}
	if _, ok := hashTag(key); !ok {
		return fmt.Errorf("the Key %q has braces that are not a Redis Cluster hash tag", key)
	}
	return nil
}

// shard is one shard of the presence hash: its key, its owners hash and
// its load hash.
type shard struct {
	key, owners, load string
}

// shardsOf lists the shards of key.
func shardsOf(key string, n int) []shard {
	out := make([]shard, n)
	for i := range out {
		k := ShardKey(key, i)
		out[i] = shard{key: k, owners: OwnersKey(k), load: LoadKey(k)}
	}
	return out
}

// LayoutKey returns the key of the layout hash of the presence hash key: the
// shard counts servers of the deployment use, each with the Redis time
// until which it is known in use, "<key>:shards". Every server marks its
// count there on each full check (about every CheckEvery beats); a reader
// looks there before it answers Stopped, and a server logs any other count
// it finds.
func LayoutKey(key string) string { return key + ":shards" }

// shardCounts runs shards.lua: it marks our count in use when mark is true,
// and answers the other counts in use, with the Redis time.
func (p *Presence) shardCounts(ctx context.Context, mark bool) ([]int, time.Time, error) {
	a := presencescript.ShardsArgs{Count: len(p.shards)}
	if mark {
		a.Mark = p.markTTL
	}
	ans, err := presencescript.Shards.Run(ctx, p.rdb, p.layout, a)
	if err != nil {
		return nil, time.Time{}, err
	}
	var others []int
	for _, n := range ans.Counts {
		if n != len(p.shards) {
			others = append(others, n)
		}
	}
	slices.Sort(others)
	return others, ans.Now, nil
}

// markShards marks our shard count in use and logs, once until it changes,
// any other count in use: readers of that count cannot find this server, nor
// can this server's readers find theirs. A failure is only logged at debug
// level (the next full check marks again).
func (p *Presence) markShards(ctx context.Context) {
	others, _, err := p.shardCounts(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Debug("presence: marking the shard count failed", "key", p.layout, "err", err)
		}
		return
	}
	desc := fmt.Sprint(others)
	if others == nil {
		desc = ""
	}
	p.mu.Lock()
	changed := desc != p.otherShards
	p.otherShards = desc
	p.mu.Unlock()
	if changed && others != nil {
		p.log.Error("presence: servers of this deployment use another shard count; every server and reader "+
			"must use the same count (readers answer unknown instead of stopped while both are in use)",
			"key", p.cfg.Key, "shards", len(p.shards), "other_shards", others)
	}
}

// markShardsAsync runs markShards on a goroutine of its own, owned by p and
// bounded by one Beat, unless one is running already or p is closed.
func (p *Presence) markShardsAsync() {
	if !p.marking.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.marking.Store(false)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer p.marking.Store(false)
		ctx, cancel := p.clock.WithTimeout(p.base, p.cfg.Beat)
		defer cancel()
		p.markShards(ctx)
	}()
}
