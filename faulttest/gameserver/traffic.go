package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/faulttest"
)

// callWithin bounds a Save or Release call in traffic mode (the library
// bounds each round trip by SaveTimeout; this bounds the wait for a save
// that is running).
const callWithin = 10 * time.Second

type profile = datadriver.Profile[faulttest.Register]

// traffic is traffic mode (-traffic): workers that Join, Update, Save,
// Release and hold random keys among a few, every operation recorded in a
// history (faulttest.HistLine) for the linearizability checker. Autosave
// is off, so every write but one kind is an operation of a worker; that
// kind, the release the library begins when another server's join asks for
// a key (or Node.Close), is recorded from OnRelease to Done.
type traffic struct {
	cfg  config
	log  *slog.Logger
	out  *emitter
	c    conns
	regs *datadriver.Driver[faulttest.Register]
	hist *faulttest.HistoryWriter
	pid  int
	ops  atomic.Int64
	wg   sync.WaitGroup // the Done watchers

	mu       sync.Mutex
	claimed  map[string]bool // keys a worker of this process holds or joins
	sessions map[*profile]*tsession
	nsess    int
}

// tsession is one session: a profile pointer from a Join, kept when a
// rejoin adopts it.
type tsession struct {
	id, key string
	epoch   int64
	p       *profile

	mu        sync.Mutex
	releasing bool   // the worker called Release, or the library began one
	libOp     string // the library release recorded from OnRelease, not yet returned
	// joinCall and joined are the call time and the value of the Join that
	// began (or adopted) the session: a library release that starts before
	// OnRelease is registered writes joined (no Update can have run).
	joinCall int64
	joined   faulttest.Register
}

func newTraffic(ctx context.Context, cfg config, stdout, stderr io.Writer) (*traffic, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	hist, err := faulttest.OpenHistory(cfg.traffic.history)
	if err != nil {
		return nil, err
	}
	t := &traffic{cfg: cfg, log: log, out: &emitter{w: stdout, job: cfg.job}, hist: hist, pid: os.Getpid(),
		claimed: make(map[string]bool), sessions: make(map[*profile]*tsession)}
	if t.c, err = openNode(ctx, cfg, log); err != nil {
		_ = hist.Close()
		return nil, err
	}
	t.regs, err = datadriver.NewDriver(t.c.node, datadriver.Config[faulttest.Register]{
		Name: cfg.driver, LockWait: cfg.lockWait, Autosave: -1,
	})
	if err != nil {
		t.c.close(ctx)
		_ = hist.Close()
		return nil, fmt.Errorf("new driver: %w", err)
	}
	return t, nil
}

// run plays until ctx ends, then stops the workers and closes the Node
// (whose releases are recorded too).
func (t *traffic) run(ctx context.Context) error {
	t.out.emit(faulttest.Event{Ev: faulttest.EvReady})
	play, stop := context.WithCancel(ctx)
	var workers sync.WaitGroup
	// Each worker's choices follow from the seed, the server's JobID and the
	// worker's number, so a seed replays the same choices (what they meet
	// still depends on timing).
	job := fnv.New32a()
	_, _ = job.Write([]byte(t.cfg.job))
	for i := range t.cfg.traffic.workers {
		rng := rand.New(rand.NewPCG(uint64(t.cfg.traffic.seed), uint64(i)<<32|uint64(job.Sum32())))
		workers.Go(func() { t.work(play, rng) })
	}
	<-ctx.Done()
	stop()
	workers.Wait()
	cctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	err := t.c.node.Close(cctx)
	t.out.emit(faulttest.Event{Ev: faulttest.EvClosed, Err: errText(err)})
	t.wg.Wait()
	t.c.closeClients()
	if herr := t.hist.Close(); err == nil {
		err = herr
	}
	return err
}

// work is one worker: with no session it joins a key no other worker of
// this process has; with one it updates (most often), saves, releases, or
// holds it idle while another server's join may take it.
func (t *traffic) work(ctx context.Context, rng *rand.Rand) {
	var s *tsession
	for {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(2*t.cfg.traffic.opEvery)+1))) {
			return
		}
		if s == nil {
			s = t.join(ctx, rng)
			continue
		}
		select {
		case <-s.p.Done():
			t.unclaim(s.key)
			s = nil
			continue
		default:
		}
		switch r := rng.IntN(100); {
		case r < 55:
			if !t.update(s) {
				t.unclaim(s.key)
				s = nil
			}
		case r < 70:
			t.save(ctx, s)
		case r < 82:
			t.release(ctx, s)
			t.unclaim(s.key)
			s = nil
		case r < 88 && t.cfg.traffic.moveTo != "":
			targets := strings.Split(t.cfg.traffic.moveTo, ",")
			t.move(ctx, s, targets[rng.IntN(len(targets))])
			if s.p.Err() != nil {
				t.unclaim(s.key)
				s = nil
			}
		default:
			sleep(ctx, t.cfg.traffic.hold)
		}
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func (t *traffic) opID() string {
	return fmt.Sprintf("%s-%d-%d", t.cfg.job, t.pid, t.ops.Add(1))
}

// claim picks a key no other worker of this process holds or joins.
func (t *traffic) claim(rng *rand.Rand) (string, bool) {
	keys := t.cfg.keys()
	t.mu.Lock()
	defer t.mu.Unlock()
	for range len(keys) {
		k := keys[rng.IntN(len(keys))]
		if !t.claimed[k] {
			t.claimed[k] = true
			return k, true
		}
	}
	return "", false
}

func (t *traffic) unclaim(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.claimed, key)
}

// join joins a free key and records the acquire; nil when it failed.
func (t *traffic) join(ctx context.Context, rng *rand.Rand) *tsession {
	key, ok := t.claim(rng)
	if !ok {
		return nil
	}
	op, called := t.opID(), faulttest.MonoNow()
	t.hist.Write(faulttest.HistLine{T: called, Op: op, Kind: faulttest.KindAcquire, Key: key})
	p, err := t.regs.Join(ctx, key)
	if err != nil {
		t.hist.Write(faulttest.HistLine{Ret: true, Op: op, Out: faulttest.OutFail, Err: err.Error()})
		t.unclaim(key)
		return nil
	}
	var v faulttest.Register
	p.View(func(d *faulttest.Register) { v = *d })
	s, adopted := t.session(key, p, called, v)
	p.OnRelease(func(d *faulttest.Register) { t.onRelease(s, *d) })
	// A profile that ended before Join returned, other than by a handoff
	// racing the return, is a fault of its own (reported beside the check).
	ended := false
	select {
	case <-p.Done():
		ended = !errors.Is(p.Err(), datadriver.ErrReleased)
	default:
	}
	t.hist.Write(faulttest.HistLine{Ret: true, Op: op, Out: faulttest.OutOK, Sess: s.id, Epoch: s.epoch, V: &v,
		Adopt: adopted, Ended: ended, Err: errText(p.Err())})
	return s
}

// session returns the session of p: a new one, or, when a rejoin adopted
// a retained profile, the one it had (its library release, if one was
// recorded, never landed: it stays unknown).
func (t *traffic) session(key string, p *profile, called int64, v faulttest.Register) (*tsession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[p]; s != nil {
		s.mu.Lock()
		s.releasing, s.libOp, s.joinCall, s.joined = false, "", called, v
		s.mu.Unlock()
		return s, true
	}
	t.nsess++
	s := &tsession{id: fmt.Sprintf("%s.%d.%d", t.cfg.job, t.pid, t.nsess), key: key, epoch: p.Epoch(), p: p,
		joinCall: called, joined: v}
	t.sessions[p] = s
	t.wg.Go(func() { t.watch(s) })
	return s, false
}

// watch waits for the session's end and returns its library release, if
// one runs: landed when the profile ended released, else unknown. A
// release the library began before OnRelease was registered (a request
// that came while the Join was returning) is recorded here, from the
// Join's call to now, with the data the Join loaded. The session stays
// known: a Join that hands the same profile back again (an adoption) goes
// on with it.
func (t *traffic) watch(s *tsession) {
	<-s.p.Done()
	err := s.p.Err()
	s.mu.Lock()
	op, unrecorded := s.libOp, !s.releasing && errors.Is(err, datadriver.ErrReleased)
	s.libOp, s.releasing = "", true
	called, joined := s.joinCall, s.joined
	s.mu.Unlock()
	if unrecorded {
		op = t.opID()
		t.hist.Write(faulttest.HistLine{T: called, Op: op, Kind: faulttest.KindLibRelease, Key: s.key, Sess: s.id, V: &joined})
	}
	if op != "" {
		out := faulttest.OutUnknown
		if errors.Is(err, datadriver.ErrReleased) {
			out = faulttest.OutOK
		}
		t.hist.Write(faulttest.HistLine{Ret: true, Op: op, Out: out, Err: errText(err)})
	}
}

// onRelease is the session's leave cleanup: for a release the worker did
// not call, it records the library's release of the data d.
func (t *traffic) onRelease(s *tsession, d faulttest.Register) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.releasing {
		return // the worker's own Release, recorded by the worker
	}
	s.releasing = true
	s.libOp = t.opID()
	t.hist.Write(faulttest.HistLine{Op: s.libOp, Kind: faulttest.KindLibRelease, Key: s.key, Sess: s.id, V: &d})
}

// update bumps the register; it reports whether the Update was accepted.
func (t *traffic) update(s *tsession) bool {
	op := t.opID()
	t.hist.Write(faulttest.HistLine{Op: op, Kind: faulttest.KindUpdate, Key: s.key, Sess: s.id})
	var from, to faulttest.Register
	ran := false
	err := s.p.Update(func(d *faulttest.Register) {
		from = *d
		d.N++
		d.Op = op
		to, ran = *d, true
	})
	l := faulttest.HistLine{Ret: true, Op: op, Out: faulttest.OutOK}
	if ran {
		l.From, l.V = &from, &to
	}
	if err != nil {
		l.Out, l.Err = faulttest.OutFail, err.Error()
	}
	t.hist.Write(l)
	return err == nil
}

// save saves the session's data and records it.
func (t *traffic) save(ctx context.Context, s *tsession) {
	t.write(ctx, s, faulttest.KindSave, s.p.Save)
}

// release releases the session, unless the library is releasing it
// already (its release is recorded from OnRelease). The claim and the call
// line are one step under s.mu: a library release that begins meanwhile
// (a request from another server) waits for it in OnRelease, and then
// lands inside the worker's recorded call (Release is idempotent: the
// worker's call returns when that release has landed). Were the line
// written after the claim, the library's release, unrecorded, could land
// and another server acquire before the worker's call line.
func (t *traffic) release(ctx context.Context, s *tsession) {
	v := s.data() // outside s.mu: OnRelease holds the data's lock, then takes s.mu
	s.mu.Lock()
	if s.releasing {
		s.mu.Unlock()
		return
	}
	s.releasing = true
	op := t.call(s, faulttest.KindRelease, v)
	s.mu.Unlock()
	t.finish(ctx, op, s.p.Release)
}

// write records a write of the session's data (its call and its
// outcome) around call, bounded by callWithin.
func (t *traffic) write(ctx context.Context, s *tsession, kind string, call func(context.Context) error) {
	t.finish(ctx, t.call(s, kind, s.data()), call)
}

// call records the call of a write of v and returns its op id.
func (t *traffic) call(s *tsession, kind string, v faulttest.Register) string {
	op := t.opID()
	t.hist.Write(faulttest.HistLine{Op: op, Kind: kind, Key: s.key, Sess: s.id, V: &v})
	return op
}

// finish runs the write call of op, bounded by callWithin, and records its
// outcome.
func (t *traffic) finish(ctx context.Context, op string, call func(context.Context) error) {
	wctx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	err := call(wctx)
	t.hist.Write(faulttest.HistLine{Ret: true, Op: op, Out: writeOutcome(err), Err: errText(err)})
}

// data is the session's data now.
func (s *tsession) data() faulttest.Register {
	var v faulttest.Register
	s.p.View(func(d *faulttest.Register) { v = *d })
	return v
}

// writeOutcome classifies a Save's or Release's error: nil landed; an
// error that says the write was refused (the lock is another's or this
// server fenced itself, the profile was released or closed) did not, and
// the checker holds it to that; anything else (a timeout, a lost answer, a
// write not replicated, a release retained and retried) may have.
func writeOutcome(err error) string {
	switch {
	case err == nil:
		return faulttest.OutOK
	case errors.Is(err, datadriver.ErrLockLost), errors.Is(err, datadriver.ErrReleased), errors.Is(err, datadriver.ErrClosed):
		return faulttest.OutFail
	}
	return faulttest.OutUnknown
}

// move moves the session to server to (Profile.MoveTo) and records it as a
// write of its data: landed on nil; refused when it failed with the
// session still live here (nothing moved); unknown when the session ended
// otherwise meanwhile (a fence, a lost lock: the flip may have landed).
func (t *traffic) move(ctx context.Context, s *tsession, to string) {
	v := s.data()
	s.mu.Lock()
	if s.releasing {
		s.mu.Unlock()
		return
	}
	op := t.call(s, faulttest.KindMove, v)
	s.mu.Unlock()
	mctx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	err := s.p.MoveTo(mctx, to)
	out := faulttest.OutOK
	switch {
	case err == nil:
	case s.p.Err() == nil:
		out = faulttest.OutFail
	default:
		out = faulttest.OutUnknown
	}
	t.hist.Write(faulttest.HistLine{Ret: true, Op: op, Out: out, Err: errText(err)})
}
