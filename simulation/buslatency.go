package simulation

import (
	"hash/fnv"
	"time"

	"github.com/ckernel/playerdata/messaging"
)

// busLatency is how long message m to server to takes on the bus: between
// 100 ns and 1 µs, a function of the message (not of the order messages are
// sent in, nor of the moment), so that a replay repeats it.
//
// Nothing else in the simulation takes virtual time, so without it the
// receiver of a message acted at the very instant its sender went on, and
// so did the receivers of messages sent at one instant, each on its own
// goroutine: whatever they did in Redis came in the scheduler's order. A
// joiner that asked for a lock and, parking for zero time (its reading of
// the holder's presence was out of date), read the presence and tried the
// acquire again at once raced the holder's release of the lock: when no
// reply followed (the release's answer was lost, or the bus dropped it),
// the join took 0 s or a park of 1 s by the toss; a message sent to the
// player of a lock handed over at that instant was applied by either
// server. With a latency the sender's work at that instant is over first,
// and messages sent at one instant arrive at instants of their own (two
// with the same latency go in the order of their content: MemBus). It
// stays below the millisecond grid the steps and the protocol's timers
// fall on.
func busLatency(to string, m messaging.Message) time.Duration {
	h := fnv.New64a()
	for _, f := range []string{to, string(m.Type), m.Driver, m.Key, m.Requester, m.Token, m.Sender} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return 100*time.Nanosecond + time.Duration(h.Sum64()%900)
}
