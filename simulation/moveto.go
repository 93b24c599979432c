package simulation

import (
	"context"
	"errors"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The game's moves of a player to a chosen server (Profile.MoveTo), and the
// observation of their flips: ownership passes from the source to the
// target at the flip, the value with it.

// moveGiveUp bounds one MoveTo of the game.
const moveGiveUp = 10 * time.Second

// moveTo moves pl's session to srv and, when it moved, joins pl there (the
// client follows the redirect). The value the flip wrote is durable.
func (s *sim) moveTo(pl *player, to *server) {
	s.mu.Lock()
	p, acked, from := pl.p, pl.acked, pl.srv
	s.mu.Unlock()
	if p == nil || from == nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, moveGiveUp)
	err := p.MoveTo(ctx, to.s.JobID)
	cancel()
	s.logf("moveto %s @%s -> %s: %v", pl.key, from.s.JobID, to.s.JobID, err)
	s.mu.Lock()
	s.result.MovesTo++
	if err == nil {
		s.result.MovedTo++
	}
	s.mu.Unlock()
	if err != nil {
		if !errors.Is(p.Err(), datadriver.ErrMoved) {
			return // still live here, or ended otherwise: the game goes on as it would
		}
		s.fail("MoveTo of %s answered %v, yet its session ended moved (%v)", pl.key, err, p.Err())
		return
	}
	if e := p.Err(); !errors.Is(e, datadriver.ErrMoved) && !errors.Is(e, datadriver.ErrFenced) {
		// A fence may end the session while the flip's answer is on its
		// way (it never waits for I/O); nothing else may.
		s.fail("MoveTo of %s answered nil, yet its session is not ended moved: %v", pl.key, e)
	}
	s.mu.Lock()
	if pl.p == p {
		if !start.Before(pl.lostAt) {
			pl.floor = acked // the flip wrote it
		}
		pl.p, pl.srv, pl.last = nil, nil, nil
	}
	s.mu.Unlock()
	s.join(pl, to)
}

// observeFlip records a flip that landed: the target holds the key from
// now (an acquisition, for invariant 9), under its token at the new epoch,
// and the data it wrote is the record's (invariant 3); the source's token
// must have been the record's (invariant 1).
func (s *sim) observeFlip(job, key string, call testsupport.ScriptCall) {
	a, err1 := record.ParseMoveArgs(call.Args)
	res, err2 := record.ParseMove(call.Val)
	if err1 != nil || err2 != nil {
		s.fail("flip call unreadable: %v %v", err1, err2)
		return
	}
	if res.Outcome != record.Moved {
		return
	}
	s.mu.Lock()
	want, known := s.tokenEpoch[a.Token]
	s.mu.Unlock()
	if known && want != res.Epoch-1 {
		s.fail("invariant 1: %s flipped %s with the token of epoch %d while the record was at epoch %d",
			job, key, want, res.Epoch-1)
	}
	s.noteAcquisition(a.To, key)
	s.noteToken(a.To, key, res.Epoch, a.ToToken)
	s.writtenTampered(job, key, a.Token)
	s.mu.Lock()
	s.lockAt[key] = time.Now()
	if a.Data != nil {
		if s.landed[key] == nil {
			s.landed[key] = make(map[int64]string)
		}
		s.landed[key][res.Ver] = string(a.Data)
	}
	s.mu.Unlock()
	s.checkWritten(job, key, record.SaveArgs{Data: a.Data, Applied: a.Applied}, res.Ver)
}
