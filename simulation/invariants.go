package simulation

import (
	"context"
	"fmt"
	"strings"
	"testing/synctest"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/vmihailenco/msgpack/v5"
)

// The invariants checked outside the script observer: kicks (6), gems (4)
// and liveness at the end of a run (8).

// kicked checks invariant 6: a session is ended for another server only
// after a request naming its lock reached this server.
func (s *sim) kicked(srv *server, key, reason string) {
	if reason != datadriver.ReasonJoinedElsewhere {
		return
	}
	s.mu.Lock()
	var pl *player
	for _, p := range s.players {
		if p.key == key {
			pl = p
		}
	}
	// The session's lock is the newest this server got to land for the key
	// (the profile may not know yet: an adoption whose answer was lost).
	var epoch int64 = -1
	rk := recordKey(key)
	held := s.latest[rk+"\x00"+srv.s.JobID]
	if pl != nil && pl.srv == srv && pl.p != nil {
		epoch = held.epoch
	}
	named := s.delivered[srv.s.JobID][rk+"\x00"+held.token]
	s.mu.Unlock()
	s.logf("kick %s on %s (epoch %d)", key, srv.s.JobID, epoch)
	if epoch >= 0 && !named {
		s.fail("invariant 6: %s ended the session of %s (epoch %d) without a request naming its lock", srv.s.JobID, key, epoch)
	}
}

// drain ends the run: the faults stop, every player leaves, and after two
// quiet minutes no lock may be held by a live server (a server may keep a
// lock only while one of its profiles uses it: an orphan would lock the
// player out for as long as the server lives).
func (s *sim) drain() {
	s.logf("DRAIN faults stop, every player leaves")
	s.mu.Lock()
	for _, srv := range s.servers {
		srv.failTo, srv.stallTo, srv.deafTo, srv.lose = time.Time{}, time.Time{}, time.Time{}, 0
	}
	s.mu.Unlock()
	s.c.Bus.SetFault(nil)
	s.wg.Wait()
	for _, pl := range s.players {
		s.mu.Lock()
		online := pl.p != nil
		s.mu.Unlock()
		if online {
			s.leave(pl)
		}
	}
	time.Sleep(2 * time.Minute)
	synctest.Wait()
	crashed := map[string]bool{}
	for _, srv := range s.servers {
		if srv.s.Crashed() {
			crashed[srv.s.JobID] = true
		}
	}
	for _, pl := range s.players {
		f, err := s.checkRedis.HMGet(context.Background(), recordKey(pl.key), "lock.token", "lock.job").Result()
		if err != nil {
			s.fail("drain: %v", err)
			return
		}
		token, _ := f[0].(string)
		job, _ := f[1].(string)
		if token != "" && !crashed[job] {
			s.fail("liveness: %s is still locked by live server %s two quiet minutes after every player left", pl.key, job)
			s.mu.Lock()
			for _, srv := range s.servers {
				if srv.s.JobID != job {
					continue
				}
				for _, line := range strings.Split(srv.s.Logs.String(), "\n") {
					if strings.Contains(line, "key="+pl.key) && !strings.Contains(line, "presence read") {
						s.pending = append(s.pending, event{at: time.Since(s.bornAt), text: "  " + job + " log: " + line})
					}
				}
			}
			s.mu.Unlock()
		}
	}
}

// checkGems checks invariant 4 on what Redis holds: every record's gems,
// or, where a trade's mark is pending on a committed trade, its image.
func (s *sim) checkGems() {
	ctx := context.Background()
	total := int64(0)
	for _, pl := range s.players {
		rk := recordKey(pl.key)
		f, err := s.checkRedis.HMGet(ctx, rk, "data", "trade").Result()
		if err != nil {
			s.fail("check: %v", err)
			return
		}
		data, _ := f[0].(string)
		trade, _ := f[1].(string)
		if trade != "" {
			m, err := s.checkRedis.HGetAll(ctx, "sim:trade:{"+trade+"}").Result()
			if err != nil {
				s.fail("check: %v", err)
				return
			}
			if m["state"] == "COMMITTED" {
				for i := 0; ; i++ {
					desc, ok := m[fmt.Sprintf("p%d", i)]
					if !ok {
						break
					}
					var d struct {
						K string `msgpack:"k"`
					}
					_ = msgpack.Unmarshal([]byte(desc), &d)
					if d.K == pl.key {
						data = m[fmt.Sprintf("img%d", i)]
					}
				}
			}
		}
		w := Wallet{Gems: initialGems}
		if data != "" {
			if err := msgpack.Unmarshal([]byte(data), &w); err != nil {
				s.fail("check: %s: %v", pl.key, err)
				return
			}
		}
		total += w.Gems
	}
	if want := int64(len(s.players)) * initialGems; total != want {
		s.fail("invariant 4: %d gems in all, want %d", total, want)
	}
}
