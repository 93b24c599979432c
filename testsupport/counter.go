package testsupport

import "github.com/ckernel/playerdata/internal/rediscount"

// CommandCounter is a go-redis hook that counts round trips (one per
// command sent on its own, one per pipeline), records the command names in
// order and counts new connections: see rediscount.Counter, which the
// benchmarks share. The zero value is ready to use; add it to a client with
// client.AddHook(counter).
type CommandCounter = rediscount.Counter
