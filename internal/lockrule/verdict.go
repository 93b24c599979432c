package lockrule

import (
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/enum"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// Rules are the servers' settings the rule reads by.
type Rules struct {
	// MaxAge is LockTTL+LockSkew: a lock without the presence flag older
	// than this on the Redis clock may change hands.
	MaxAge time.Duration
	// Skew is LockSkew: a lock without the presence flag stamped further
	// ahead of the Redis clock is not one the library wrote.
	Skew time.Duration
	// Beat is the servers' presence Beat: two stopped reads at least this
	// far apart prove a holder stopped.
	Beat time.Duration
}

// Answer is the authority's answer to "may this lock change hands now?".
type Answer int

// The answers. The first four are yeses, the others noes.
const (
	// Free: nobody holds the lock.
	Free Answer = iota + 1
	// Stopped: its holder is proven stopped (two stopped reads at least a
	// Beat apart, nothing else between) by reads sent after the lock was
	// last written.
	Stopped
	// Aged: the lock carries no presence flag and is older than MaxAge on
	// the Redis clock.
	Aged
	// NoLiveHolder: the lock names no holder, and no live server can hold
	// its token: every server in the presence hash, and every shard's
	// missing beat, is proven stopped.
	NoLiveHolder
	// Alive: its holder beats presence.
	Alive
	// Unknown: presence cannot tell: the read failed, Redis restarted or
	// failed over (or the hash was first beaten into) less than one TTL ago,
	// the shard's clock stepped, or servers use another shard count.
	Unknown
	// Young: the lock carries no presence flag and is not older than MaxAge
	// (or its stamp cannot be read).
	Young
	// LiveServers: the lock names no holder, and servers whose presence is
	// alive or unknown may hold its token (Verdict.Servers).
	LiveServers
)

// May reports whether the answer lets the lock change hands.
func (a Answer) May() bool { return a >= Free && a <= NoLiveHolder }

// String is the answer's name: "free", "stopped", "aged", ...
func (a Answer) String() string {
	if s, ok := enum.Name(a, "", "free", "stopped", "aged", "no-live-holder", "alive", "unknown", "young", "live-servers"); ok {
		return s
	}
	return "Answer(" + strconv.Itoa(int(a)) + ")"
}

// Verdict is the authority's answer with what it was read from.
type Verdict struct {
	Answer Answer
	// Reading is the named holder's last presence reading (zero when none
	// was read).
	Reading presencecore.Reading
	// RetryIn is when asking again may give another answer (0: no time is
	// known: the holder must release, stop, or presence become readable).
	RetryIn time.Duration
	// Servers are the servers that may hold a lock naming no holder
	// (LiveServers), or that were proven stopped (NoLiveHolder).
	Servers []string
	// Reads is how many presence reads the judgment made, Took how long it
	// took (a proof waits one Beat between its reads).
	Reads int
	Took  time.Duration
	// Why says it in one sentence, for people.
	Why string
}
