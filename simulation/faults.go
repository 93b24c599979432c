package simulation

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/messaging"
	"github.com/ckernel/playerdata/presence"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/redis/go-redis/v9"
)

// The faults: what the servers' Redis calls suffer (before and after), and
// the fault drawn at a step.

// isSave reports whether cmd is the record's save.lua call.
func isSave(cmd redis.Cmder) bool {
	in, ok := testsupport.Identify(cmd)
	return ok && in.Script == record.ScriptSave
}

// isBeat reports whether cmd is srv's own presence beat.
func isBeat(srv *server, cmd redis.Cmder) bool {
	in, ok := testsupport.Identify(cmd)
	if !ok || in.Script != presence.ScriptBeat {
		return false
	}
	a, err := presence.ParseBeatArgs(in.Args)
	return err == nil && a.JobID == srv.s.JobID
}

// before injects the faults that act before a command reaches Redis.
func (s *sim) before(srv *server, ctx context.Context, cmd redis.Cmder) error {
	now := time.Now()
	s.mu.Lock()
	failTo, stallTo, deafTo := srv.failTo, srv.stallTo, srv.deafTo
	s.mu.Unlock()
	switch {
	case isSave(cmd) && now.Before(failTo):
		return testsupport.ErrInjected
	case isSave(cmd) && now.Before(stallTo):
		// Stalled saves come out in the order they went in, a microsecond
		// apart, rather than all at one instant in the scheduler's order.
		s.mu.Lock()
		srv.stalled++
		out := stallTo.Add(time.Duration(srv.stalled) * time.Microsecond)
		s.mu.Unlock()
		t := time.NewTimer(out.Sub(now))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	case isBeat(srv, cmd) && now.Before(deafTo):
		return testsupport.ErrInjected
	}
	return nil
}

// after loses answers of saves that landed.
func (s *sim) after(srv *server, cmd redis.Cmder, err error) error {
	if err != nil || !isSave(cmd) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv.lose > 0 {
		srv.lose--
		return testsupport.ErrInjected
	}
	return nil
}

// fault injects one fault, chosen from the seed.
func (s *sim) fault(alive []*server) {
	s.mu.Lock()
	s.result.Faults++
	s.mu.Unlock()
	srv := alive[s.rng.IntN(len(alive))]
	now := time.Now()
	dur := time.Duration(1+s.rng.IntN(20)) * time.Second
	switch k := s.rng.IntN(10); k {
	case 0:
		s.logf("FAULT saves of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.failTo = now.Add(dur)
		s.mu.Unlock()
	case 1:
		s.logf("FAULT saves of %s stall for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.stallTo = now.Add(dur)
		s.mu.Unlock()
	case 2:
		n := 1 + s.rng.IntN(3)
		s.logf("FAULT the answers of the next %d saves of %s are lost", n, srv.s.JobID)
		s.mu.Lock()
		srv.lose += n
		s.mu.Unlock()
	case 3:
		s.logf("FAULT presence writes of %s fail for %s", srv.s.JobID, dur)
		s.mu.Lock()
		srv.deafTo = now.Add(dur)
		s.mu.Unlock()
	case 4:
		s.logf("FAULT the bus drops, delays and duplicates messages for %s", dur)
		until, salt := now.Add(dur), s.rng.Uint64()
		s.c.Bus.SetFault(func(to string, m messaging.Message) testsupport.Fault {
			now := time.Now()
			if now.After(until) {
				return testsupport.Fault{}
			}
			// What happens to a message is a function of the message and the
			// moment, not of the order messages are sent in: a replay repeats it.
			h := fnv.New64a()
			fmt.Fprintf(h, "%d|%s|%s|%s|%s|%s|%d", salt, to, m.Type, m.Key, m.Requester, m.Token, now.UnixNano())
			r := h.Sum64()
			switch r % 4 {
			case 0:
				return testsupport.Fault{Drop: true}
			case 1:
				return testsupport.Fault{Delay: time.Duration(r>>8%3000) * time.Millisecond}
			case 2:
				return testsupport.Fault{Echo: time.Duration(1+r>>8%30) * time.Second}
			}
			return testsupport.Fault{}
		})
	case 5:
		if len(alive) < 2 {
			return
		}
		s.logf("FAULT crash %s", srv.s.JobID)
		s.mu.Lock()
		s.result.Crashes++
		s.mu.Unlock()
		srv.s.Crash()
		s.startServer()
	case 6:
		s.logf("FAULT Redis restarts: the presence hash and the script cache are gone")
		s.mu.Lock()
		s.redisRestart = now
		s.mu.Unlock()
		if err := s.c.RedisRestart(context.Background()); err != nil {
			s.fail("redis restart: %v", err)
		}
	default:
		// A forged request (a random token) to a server, for a random key.
		pl := s.players[s.rng.IntN(len(s.players))]
		token := fmt.Sprintf("%016x", s.rng.Uint64())
		s.logf("FAULT a forged request for %s to %s", pl.key, srv.s.JobID)
		bus := s.c.Bus.Endpoint("forger")
		_ = bus.Publish(context.Background(), srv.s.JobID, messaging.Message{
			Type: messaging.TypeRequest, Driver: driverName, Key: pl.key, Requester: "forger", Token: token,
		})
	}
}
