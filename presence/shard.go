package presence

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
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
		return fmt.Errorf("Key %q has braces: with %d shards each shard needs a hash tag of its own", key, shards)
	}
	if _, ok := hashTag(key); !ok {
		return fmt.Errorf("Key %q has braces that are not a Redis Cluster hash tag", key)
	}
	return nil
}

// shard is one shard of the presence hash: its key and its owners hash.
type shard struct {
	key, owners string
}

// shardsOf lists the shards of key.
func shardsOf(key string, n int) []shard {
	out := make([]shard, n)
	for i := range out {
		k := ShardKey(key, i)
		out[i] = shard{key: k, owners: OwnersKey(k)}
	}
	return out
}
