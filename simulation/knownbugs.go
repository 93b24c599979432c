package simulation

import (
	"fmt"
	"strings"
)

// The library bugs the tampers found that are not fixed yet. Each is told
// apart from everything else by what exactly happened, and each time it
// happens it is logged (KNOWN BUG) and counted (Result.KnownBugs), instead
// of failing the run; with Config.FailKnownBugs it fails the run like any
// violation. Once the library is fixed, its entry goes, and with it the
// leniency.

// knownBug is a library bug the simulation knows of.
type knownBug int

const (
	// bugSendRecreates: a record deleted while its history or inbox remains
	// is refused (ErrCorruptRecord) until the operator starts it over; but a
	// Send meanwhile recreates the record hash with inbox.seq alone, and the
	// next join then reads it as new: Defaults at epoch 1, while its history
	// remains (acquire.lua's check for a missing record is skipped when
	// inbox.seq is there). Seed 30088.
	bugSendRecreates knownBug = iota
	// bugStrandedInbox: `repair --force` starts a missing record over with
	// fmt, epoch and ver, but no inbox.seq; a load reads the inbox only when
	// inbox.seq > 0, so the messages waiting in the inbox it kept are
	// never applied (until a new Send raises inbox.seq). Seeds 1006, 30031.
	bugStrandedInbox
	// bugSettleCause: a trade's settle refused because the record is corrupt
	// (or gone) ends the session with causeTaken (trade.go's loseLock), not
	// the write's own cause: the game hears ReasonLockLost ("loaded on
	// another server") instead of ReasonRecordCorrupt (ReasonRecordGone),
	// and the lock of a corrupt record is not given back: once the record is
	// repaired, the server keeps an orphan lock, and a join of the key on
	// that very server waits out its LockWait on it for as long as the
	// server lives (one on another server has it released). Seeds 30006,
	// 30021.
	bugSettleCause
	numKnownBugs
)

func (b knownBug) String() string {
	switch b {
	case bugSendRecreates:
		return "a Send recreates a deleted record as new"
	case bugStrandedInbox:
		return "a record started over strands its inbox"
	case bugSettleCause:
		return "a refused settle ends the session as lock_lost"
	}
	return fmt.Sprintf("knownBug(%d)", int(b))
}

// KnownBugs counts the occurrences of each library bug the simulation
// knows of (knownbugs.go), by bug.
type KnownBugs [numKnownBugs]int

// String is the per-run summary line's part on the known bugs.
func (k KnownBugs) String() string {
	var parts []string
	for b, n := range k {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d × %s", n, knownBug(b)))
		}
	}
	if len(parts) == 0 {
		return "known bugs: none met"
	}
	return "known bugs met: " + strings.Join(parts, ", ")
}

// knownBug records an occurrence of b: a violation with
// Config.FailKnownBugs, else a line of the trace and a count.
func (s *sim) knownBug(b knownBug, format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	if s.cfg.FailKnownBugs {
		s.fail("known library bug (%s): %s", b, what)
		return
	}
	s.logf("KNOWN BUG (%s): %s", b, what)
	s.mu.Lock()
	s.result.KnownBugs[b]++
	s.mu.Unlock()
}

// settleOrphan reports whether pl's record is still locked by live server
// job, two quiet minutes after every player left, because a refused settle
// ended job's session as a lost lock (bugSettleCause): its lock was not
// given back. The operator's forced repair at the end frees it.
func (s *sim) settleOrphan(pl *player, job string) bool {
	s.mu.Lock()
	orphan := s.tampers.settleLost[recordKey(pl.key)+"\x00"+job]
	s.mu.Unlock()
	if orphan {
		s.knownBug(bugSettleCause, "%s is still locked by live server %s two quiet minutes after every player left: "+
			"the refused settle that ended its session did not give the lock back", pl.key, job)
	}
	return orphan
}

// avoidOrphan reports whether pl must not join srv at the end of the run
// because srv holds the orphan lock a refused settle left (bugSettleCause):
// a join of the key on srv itself waits out its LockWait on srv's own lock
// (a join on another server has srv release it), and no operator command
// frees a live server's lock.
func (s *sim) avoidOrphan(pl *player, srv *server) bool {
	s.mu.Lock()
	orphan := s.tampers.settleLost[recordKey(pl.key)+"\x00"+srv.s.JobID]
	s.mu.Unlock()
	if orphan {
		s.knownBug(bugSettleCause, "a join of %s on %s, which holds its orphan lock, would wait out its LockWait: "+
			"it joins on another server, whose request has %s give the lock back", pl.key, srv.s.JobID, srv.s.JobID)
	}
	return orphan
}
