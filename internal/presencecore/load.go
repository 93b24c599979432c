package presencecore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/presencescript"
)

// ErrBadLoad means a server's entry of the load hash (see [LoadKey]) could
// not be read as a session count: another tool wrote something else there,
// or the load key holds another type. The count is ignored, never guessed;
// the server's next beat that carries a count writes the entry again.
var ErrBadLoad = errors.New("presence: unreadable session count")

// LoadKey returns the key of the load hash beside the shard hash shardKey:
// each server's session count, <JobID> = "<sessions>@<ms>" (the count and
// the Redis time it was written at, ms). It shares shardKey's Cluster slot
// as [OwnersKey] does: "<shardKey>:load" when shardKey has a hash tag, else
// "<shardKey>:{<shardKey>}:load".
func LoadKey(shardKey string) string {
	if _, ok := hashTag(shardKey); ok {
		return shardKey + ":load"
	}
	return shardKey + ":{" + shardKey + "}:load"
}

// Load is one live server's session count, as [Presence.Loads] reads it.
type Load struct {
	// JobID names the server.
	JobID string
	// Sessions is its session count (Config.Sessions: for a datadriver
	// Node, the profiles it holds or is loading) as its beat last wrote it.
	Sessions int
	// At is when that count was written, on the Redis clock (ms precision).
	// A beat writes the count when it changed and on every full check, so
	// a live server's At is at most about CheckEvery beats old, however
	// steady it is.
	At time.Time
	// ExpiresIn is the time until the server's beat expires (> 0).
	ExpiresIn time.Duration
	// Shard is the shard the server beats into.
	Shard int
}

// Loads returns the session count of every live server that publishes one
// (Config.Sessions), least loaded first (ties by JobID): what a drain reads
// to choose where profiles go. A server that is not Alive is left out, and
// so is a live one without a readable count (a build before counts, a
// Presence without Config.Sessions, or an entry another tool broke: see
// [Presence.List] for those, with the reason in Entry.SessionsErr). It costs
// what List costs: one pipeline of script calls over every shard, O(servers),
// then the layout hash. When servers use another shard count, Loads returns
// what it read with an error wrapping [ErrShardMismatch] (a live beat is
// live whatever the count); other errors come with no loads.
func (p *Presence) Loads(ctx context.Context) ([]Load, error) {
	entries, err := p.List(ctx)
	if err != nil && !errors.Is(err, ErrShardMismatch) {
		return nil, err
	}
	loads := []Load{}
	for _, e := range entries {
		if e.Status != Alive || e.SessionsAt.IsZero() {
			continue
		}
		loads = append(loads, Load{JobID: e.JobID, Sessions: e.Sessions, At: e.SessionsAt,
			ExpiresIn: e.ExpiresIn, Shard: e.Shard})
	}
	slices.SortFunc(loads, func(a, b Load) int {
		return cmp.Or(cmp.Compare(a.Sessions, b.Sessions), strings.Compare(a.JobID, b.JobID))
	})
	return loads, err
}

// parseLoad reads a load hash entry, "<sessions>@<ms>".
func parseLoad(raw string) (int, time.Time, error) {
	count, at, ok := strings.Cut(raw, "@")
	n, err1 := strconv.Atoi(count)
	ms, err2 := strconv.ParseInt(at, 10, 64)
	if !ok || err1 != nil || err2 != nil || n < 0 || ms <= 0 {
		shown := raw
		if len(shown) > 64 {
			shown = shown[:64] + "..."
		}
		return 0, time.Time{}, fmt.Errorf("%w: %q is not \"<sessions>@<ms>\"", ErrBadLoad, shown)
	}
	return n, time.UnixMilli(ms), nil
}

// setLoad fills e's count from its load entry raw, or, when the load hash
// could not be read, from that error (loadErr, "" when it was read). Only
// a live server's count is given.
func (e *Entry) setLoad(raw, loadErr, loadKey string) {
	switch {
	case e.Status != Alive:
	case loadErr != "":
		e.SessionsErr = fmt.Errorf("%w: the load hash %s could not be read: %s", ErrBadLoad, loadKey, loadErr)
	case raw == "":
	default:
		n, at, err := parseLoad(raw)
		if err != nil {
			e.SessionsErr = fmt.Errorf("%s in %s: %w", e.JobID, loadKey, err)
			return
		}
		e.Sessions, e.SessionsAt = n, at
	}
}

// loadAnswered records what became of the count a beat carried (sent is
// -1 when it carried none): a written count needs no resend until it
// changes; a failed write is logged once until one succeeds; a new Redis run
// found by a beat that wrote no count (the load hash may have been lost
// with the beats) has it sent again.
func (p *Presence) loadAnswered(sent int, ans presencescript.BeatAnswer) {
	p.mu.Lock()
	first := false
	switch {
	case ans.Load == presencescript.LoadWritten: // into this run, whatever it is
		p.lastSessions, p.loadFailing = sent, false
	case ans.Load == presencescript.LoadFailed:
		p.lastSessions = -1
		first, p.loadFailing = !p.loadFailing, true
	case ans.Reset:
		p.lastSessions = -1
	}
	p.mu.Unlock()
	if first {
		p.log.Warn("presence: the session count could not be written (the load key holds another type; "+
			"readers ignore this server's count until it can be); the beat itself is fine",
			"load_key", p.own.load)
	}
}
