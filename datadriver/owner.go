package datadriver

import (
	"context"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/deadlines"
	"github.com/ckernel/playerdata/internal/defaults"
)

// A profile's writes run on its executor, one at a time, in order, so the
// write state (Profile.w) has one owner and needs no lock: a game's Save
// and Release, autosaves, lock refreshes, the release a handoff asks for
// and its retries, adoption, inbox pulls and restores. The executor is a
// mailbox, not a goroutine: posting to an idle mailbox starts one drain, a
// goroutine that runs the mailbox's events one at a time and exits when it
// is empty, so an idle profile costs no goroutine (as actor runtimes
// dispatch: Orleans, Akka). A drain is a goroutine of its own rather than
// a worker of a fixed pool on purpose: a trade borrows the executor (the
// drain runs the trade's entry, then waits while the trade's coordinator
// uses the write state, until the trade leaves), and a coordinator holding
// several profiles' executors would deadlock a pool whose workers were all
// parked so. The drain ends with the profile: what is still queued then is
// answered with the end's error. A request that finds the mailbox idle is
// run by its caller instead, which is the executor meanwhile (runInline:
// a game's Save or Release, MoveTo, a restore, whose callers would only
// wait for it): no goroutine is started nor woken for it.
//
// The autosave and the lock refresh are one deadline that posts a tick;
// the work runs on the executor. Every profile's tick and age fence wait
// on the driver's one timer (internal/deadlines), not on a timer each. The
// deadlines that guard safety (the presence lease, the age fence) are not
// the executor's: they end the session whatever its writes are doing.

// request is work for a profile's executor, whose caller waits for its
// answer.
type request struct {
	ctx  context.Context
	run  func(ctx context.Context) error
	done chan error // buffered 1
	next *request   // the next in its mailbox
}

// signal is a mailbox event that carries no data: posted twice before it
// runs, it runs once.
type signal uint8

const (
	sigStart signal = 1 << iota // the executor's first work: catch up with the inbox
	sigLeave                    // run the release now (a handoff, a retried release)
	sigPull                     // a message waits in the inbox
	sigTick                     // the autosave or the lock refresh may be due
)

// mailbox is a profile's executor: its queued work and whether a drain
// runs it.
type mailbox struct {
	mu sync.Mutex
	// last is the last queued request; the requests are a ring linked by
	// next, last.next the first (one word in every resident profile, where
	// a slice takes three and a head and tail two). Through push, pop,
	// remove, queued.
	last    *request
	signals signal
	running bool // a drain runs
	started bool // startLocked ran: events posted before wait for it
	// ask is a pending leave ask (askLeave) for the session of token
	// generation askGen; causeNone: none.
	ask    cause
	askGen uint32
}

// do runs f on the executor, after what is queued there now, and returns
// its error: on the calling goroutine when the executor is idle
// (runInline), else on the drain. ctx bounds the wait and is f's context.
// A profile that has ended answers its end error.
func (p *Profile[T]) do(ctx context.Context, f func(context.Context) error) error {
	r := &request{ctx: ctx, run: f}
	if ran, err := p.runInline(r); ran {
		return err
	}
	r.done = make(chan error, 1)
	if err := p.enqueue(r); err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		p.withdraw(r) // or f runs, sees ctx end too, and returns soon
		return ctx.Err()
	}
}

// enqueue queues r on the executor; r.done will get its answer. A profile
// that has ended answers its end error at once.
func (p *Profile[T]) enqueue(r *request) error {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopping() {
		return p.endErr()
	}
	m.push(r)
	p.wakeLocked()
	return nil
}

// runInline runs r on the calling goroutine when the executor is idle
// (started, no drain running, nothing queued, no signal pending) and
// reports whether it did, with r's error; otherwise r is not run and the
// caller queues it. The caller is the executor while r runs, as a drain
// would be, and is counted like one for shutdown; what is posted meanwhile
// waits, and a drain starts for it once r is done. It saves a call that
// finds the executor idle (most game calls) the hop to a new drain
// goroutine, whose stack would grow again through r's work, and the two
// wake-ups of the hop there and back.
func (p *Profile[T]) runInline(r *request) (bool, error) {
	if !p.claimIdle() {
		return false, nil
	}
	err := p.runRequest(r)
	m := &p.mb
	m.mu.Lock()
	m.running = false
	if p.stopping() {
		p.failQueuedLocked()
		p.rearm() // the age fence alone
	} else if m.queued() || m.signals != 0 {
		p.wakeLocked()
	}
	m.mu.Unlock()
	p.d.wg.Done()
	return true, err
}

// runRequest runs r on the executor (unless its caller gave up: then its
// context's error) and re-arms the tick, which r may have moved.
func (p *Profile[T]) runRequest(r *request) error {
	err := r.ctx.Err()
	if err == nil {
		err = r.run(r.ctx)
	}
	p.rearm()
	return err
}

// rearm points the profile's timer at its next tick (the next autosave or
// refresh), or at its age deadline when that comes first; at the age
// deadline alone once the executor stops with the driver (the fence still
// guards a profile the driver is closing). Nothing once the profile ended
// (its end stopped the timer). On the executor only.
func (p *Profile[T]) rearm() {
	if p.ended.Load() != nil {
		return
	}
	at := p.ageDeadline()
	if p.d.ctx.Err() == nil {
		if tick := p.nextTick(); tick.Before(at) {
			at = tick
		}
	}
	p.d.timers.ResetAt(p, at)
}

// claimIdle makes the caller the executor when it is idle, counted in
// d.wg (the caller calls d.wg.Done), and reports whether it did.
func (p *Profile[T]) claimIdle() bool {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopping() || m.running || !m.started || m.queued() || m.signals != 0 {
		return false
	}
	d := p.d
	d.execMu.RLock()
	defer d.execMu.RUnlock()
	if d.execClosed {
		return false
	}
	d.wg.Add(1)
	m.running = true
	return true
}

// withdraw takes r off the queue if its run has not begun, answering its
// context's error, and reports whether it did.
func (p *Profile[T]) withdraw(r *request) bool {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.remove(r) {
		return false
	}
	r.done <- r.ctx.Err()
	return true
}

// post posts s to the executor (non-blocking: one pending s is enough);
// dropped once the profile has ended.
func (p *Profile[T]) post(s signal) {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopping() {
		return
	}
	m.signals |= s
	p.wakeLocked()
}

// wakeLocked starts a drain when none runs and the executor has started: a
// tick alone waits for one of the driver's tick workers (tickQueue), any
// other work starts a goroutine at once. p.mb.mu held.
func (p *Profile[T]) wakeLocked() {
	m := &p.mb
	if m.running || !m.started {
		return
	}
	if m.signals == sigTick && !m.queued() {
		if !p.d.queueTick(p) {
			p.failQueuedLocked() // the driver is closed
		}
		return
	}
	if !p.d.spawn(p.drain) {
		// The driver is closed: nothing runs any more.
		p.failQueuedLocked()
		return
	}
	m.running = true
}

// failQueuedLocked answers what is queued with the end's error and drops
// the signals. p.mb.mu held.
func (p *Profile[T]) failQueuedLocked() {
	m := &p.mb
	for r := m.pop(); r != nil; r = m.pop() {
		r.done <- p.endErr()
	}
	m.signals = 0
}

// endErr is the profile's end error (ErrClosed while it is not known).
func (p *Profile[T]) endErr() error {
	if err := p.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// startLocked starts the executor of a profile that was just handed out:
// its first work (the inbox's catch-up), and its timer (the autosave and
// refresh tick, the age fence). d.mu held (the profile was just put in the
// map); the executor is not running yet.
func (p *Profile[T]) startLocked() {
	d := p.d
	p.w.autosaveAt = d.instantOf(d.node.clock.Now().Add(p.phase0(p.autosavePeriod())))
	p.rearm()
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started = true
	if p.catchUpDue() {
		m.signals |= sigStart
	}
	if m.signals != 0 || m.queued() {
		p.wakeLocked()
	}
}

// deadline is the profile's entry on the driver's timers.
func (p *Profile[T]) deadline() *deadlines.Entry { return &p.timer }

// drain runs the mailbox's events one at a time until it is empty or the
// profile ends: the signals first (the start's catch-up before all), then
// one request, and again.
func (p *Profile[T]) drain() {
	for {
		s, r := p.next()
		switch {
		case s == 0 && r == nil:
			return
		case s != 0:
			p.runSignal(s)
			p.rearm()
		default:
			r.done <- p.runRequest(r)
		}
	}
}

// next takes the mailbox's next event; none when it is empty or the
// profile ended (then the drain stops, and what was queued is answered).
func (p *Profile[T]) next() (signal, *request) {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.stopping() {
		p.failQueuedLocked()
		m.running = false
		p.rearm() // the age fence alone
		return 0, nil
	}
	if m.signals != 0 {
		s := m.signals & -m.signals // the lowest: sigStart first
		m.signals &^= s
		return s, nil
	}
	r := m.pop()
	if r == nil {
		m.running = false
	}
	return 0, r
}

// runSignal runs the work of s on the executor.
func (p *Profile[T]) runSignal(s signal) {
	switch s {
	case sigStart:
		p.catchUpInbox()
	case sigLeave:
		p.runLeave()
	case sigPull:
		p.pullInbox("")
	case sigTick:
		if now := p.d.node.clock.Now(); !now.Before(p.d.timeAt(p.w.autosaveAt)) {
			p.retryRefused()
			p.w.autosaveAt = p.d.instantOf(p.d.node.clock.Now().Add(p.autosave()))
		}
		p.refresh()
	}
}

// nextTick is when the autosave or the refresh is due, whichever comes
// first (no clock read: the timers run a time passed at once).
func (p *Profile[T]) nextTick() time.Time {
	at := p.d.timeAt(p.w.autosaveAt)
	if refresh := p.refreshAt(); refresh.Before(at) {
		return refresh
	}
	return at
}

// spawn runs f on a goroutine the driver waits for at shutdown; false once
// the driver's executors are closed (f does not run).
func (d *Driver[T]) spawn(f func()) bool {
	d.execMu.RLock()
	defer d.execMu.RUnlock()
	if d.execClosed {
		return false
	}
	d.goCounted(f)
	return true
}

// stopExecutor answers what is queued in a profile that ends when no drain
// runs to do it (its end stopped its timer).
func (p *Profile[T]) stopExecutor() {
	m := &p.mb
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		p.failQueuedLocked()
	}
}

// closeExecutors stops spawn from starting drains: every one started
// before is counted in d.wg.
func (d *Driver[T]) closeExecutors() {
	d.execMu.Lock()
	d.execClosed = true
	d.execMu.Unlock()
}

// autosavePeriod is the autosave period; a retained profile retries its
// release at this period even when autosave is off.
func (p *Profile[T]) autosavePeriod() time.Duration {
	if p.d.cfg.Autosave < 0 {
		return defaults.Autosave
	}
	return p.d.cfg.Autosave
}

// autosave saves a live profile or retries the release of a retained one,
// and returns when to come again. At most MaxConcurrentSaves autosaves of a
// Node run at once: a tick that finds none free comes again soon.
func (p *Profile[T]) autosave() time.Duration {
	d := p.d
	period := p.autosavePeriod()
	ph := p.phaseNow()
	if (ph == phaseLive && d.cfg.Autosave < 0) || (ph != phaseLive && ph != phaseRetained) {
		return period
	}
	select {
	case d.node.saveSem <- struct{}{}:
		defer func() { <-d.node.saveSem }()
	default:
		return max(period/16, 10*time.Millisecond)
	}
	var err error
	if ph == phaseRetained {
		err = p.release(p.bg())
	} else {
		err = p.write(p.bg(), writeAutosave)
	}
	if err != nil && !p.stopping() && causeOf(err) == causeNone {
		d.log.Warn("autosave failed", "key", p.key, "phase", ph.String(), "err", err)
		d.saveFailed(p.key, err)
	}
	return period
}

// refreshAt is when the lock needs a refresh: LockTTL/2 after the last
// landed write (or a failed refresh's retry time, when later).
func (p *Profile[T]) refreshAt() time.Time {
	at := p.d.timeAt(instant(p.lastSent.Load())).Add(p.d.cfg.LockTTL / 2)
	if r := p.w.refreshRetryAt(); r != 0 {
		if retry := p.d.timeAt(r); retry.After(at) {
			return retry
		}
	}
	return at
}

// refresh writes nothing but the lock's timestamp (one save.lua call
// without data) when no write landed for LockTTL/2, so that an idle session
// never nears its age deadline. A failed refresh is tried again after a
// sixteenth of LockTTL.
func (p *Profile[T]) refresh() {
	d := p.d
	if ph := p.phaseNow(); (ph != phaseLive && ph != phaseRetained) || p.refreshAt().After(d.node.clock.Now()) {
		return
	}
	err := p.write(p.bg(), writeRefresh)
	if err != nil && !p.stopping() && causeOf(err) == causeNone {
		p.w.made().refreshRetry = d.instantOf(d.node.clock.Now().Add(d.cfg.LockTTL / 16))
		d.log.Warn("lock refresh failed", "key", p.key, "err", err)
		d.saveFailed(p.key, err)
	}
}

// releaseInBackground runs the release a handoff or a leave asked for.
func (p *Profile[T]) releaseInBackground() {
	if ph := p.phaseNow(); ph != phaseLeaving && ph != phaseRetained {
		return
	}
	if err := p.release(p.bg()); err != nil && !p.stopping() && causeOf(err) == causeNone {
		p.d.saveFailed(p.key, err)
	}
}
