package testsupport

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/messaging"
)

// Fault is what MemBus does with one published message.
type Fault struct {
	Drop      bool          // the message is lost
	Delay     time.Duration // delivered this much later (on the bus clock)
	Duplicate bool          // delivered twice
	Echo      time.Duration // delivered as usual, and a second copy this much later (a late duplicate)
}

// MemBus is an in-process messaging.Bus for tests and the simulation: every
// message goes through the real wire codec, then to the subscriber of its
// subject on that subscriber's own goroutine, in order. Faults make a
// message drop, arrive late or twice, or make a publish fail; Disconnect
// cuts a server off in both directions; Pause holds a server's messages, in
// both directions, until Resume.
//
// By default a message reaches its subscriber's queue within Publish. With
// SetLatency each message takes a while: on a virtual clock, what its
// sender does at the instant it publishes is then over before the message
// arrives, instead of racing with what the receiver does about it, and
// messages sent at one instant can be made to arrive at different ones.
// Messages due at one instant arrive one per nanosecond in the order of
// their content, so that two published at one instant by different
// goroutines (an order that is the scheduler's) arrive in the same order in
// every replay, and each is handled before the next arrives.
type MemBus struct {
	clock clock.Clock

	mu           sync.Mutex
	subs         map[string]*memSub
	fault        func(to string, m messaging.Message) Fault
	publishError func(to string, m messaging.Message) error
	onDeliver    func(to string, m messaging.Message)
	cut          map[string]bool
	paused       map[string][]heldMessage // job -> messages to or from it, held until Resume
	wg           sync.WaitGroup
	timers       map[*clock.Timer]struct{} // delayed deliveries not yet made
	due          []*dueMessage             // delayed messages not yet delivered
	seq          uint64                    // the last dueMessage.seq handed out
	latency      func(to string, m messaging.Message) time.Duration
	closed       bool
	stats        MemBusStats
}

// MemBusStats counts what a MemBus did.
type MemBusStats struct {
	Published, Delivered, Dropped, Duplicated, Delayed, Failed, NoSubscriber int
	Held                                                                     int // messages held while their sender or receiver was paused
}

// heldMessage is a message held while its sender or receiver is paused:
// raw goes to to once after each of delays (0: at once), as Publish would
// have sent it.
type heldMessage struct {
	to     string
	raw    []byte
	delays []time.Duration
}

// dueMessage is a message delivered later: raw goes to to at at; seq is
// its place in the order of sending.
type dueMessage struct {
	at  time.Time
	to  string
	raw []byte
	seq uint64
}

// compare orders messages due at one instant by their content, then by
// the order they were sent in.
func (m *dueMessage) compare(o *dueMessage) int {
	if c := m.at.Compare(o.at); c != 0 {
		return c
	}
	if c := strings.Compare(m.to, o.to); c != 0 {
		return c
	}
	if c := bytes.Compare(m.raw, o.raw); c != 0 {
		return c
	}
	return cmp.Compare(m.seq, o.seq)
}

var _ messaging.Bus = (*MemBusEndpoint)(nil)

// NewMemBus returns an empty bus whose delays run on c (nil: the real
// clock).
func NewMemBus(c clock.Clock) *MemBus {
	if c == nil {
		c = clock.New()
	}
	return &MemBus{clock: c, subs: make(map[string]*memSub), cut: make(map[string]bool),
		paused: make(map[string][]heldMessage), timers: make(map[*clock.Timer]struct{})}
}

// Endpoint is server job's view of the bus: what it publishes is marked as
// coming from job, so Disconnect(job) also cuts what it sends.
func (b *MemBus) Endpoint(job string) *MemBusEndpoint { return &MemBusEndpoint{bus: b, from: job} }

// SetFault installs (nil removes) the fault applied to every message.
func (b *MemBus) SetFault(f func(to string, m messaging.Message) Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = f
}

// SetLatency installs (nil removes) how long each message published from
// now on takes (on the bus clock) to reach its subscriber, on top of any
// Fault.Delay: f sees the message and whom it goes to. Without it a message
// is delivered within Publish. A message held by Pause goes at Resume, as
// it would have gone when published (its latency starts then).
func (b *MemBus) SetLatency(f func(to string, m messaging.Message) time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.latency = f
}

// SetPublishError installs (nil removes) a failure of Publish itself.
func (b *MemBus) SetPublishError(f func(to string, m messaging.Message) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishError = f
}

// OnDeliver installs (nil removes) a function that sees every message just
// before its subscriber's handler does.
func (b *MemBus) OnDeliver(f func(to string, m messaging.Message)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onDeliver = f
}

// Disconnect cuts job off: nothing it sends or is sent arrives, until
// Reconnect.
func (b *MemBus) Disconnect(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cut[job] = true
}

// Reconnect undoes Disconnect.
func (b *MemBus) Reconnect(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.cut, job)
}

// Pause holds job's messages, as a paused process neither reads nor sends:
// what it publishes and what reaches it is kept, in order, until Resume
// (faults and Disconnect still apply). Pausing a paused job changes
// nothing.
func (b *MemBus) Pause(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.paused[job]; !ok {
		b.paused[job] = nil
	}
}

// Resume undoes Pause: the messages held go on in the order they were held,
// a microsecond apart (so that on a virtual clock they have an order even at
// one instant), each as it would have gone when it was published (its
// delays start now).
func (b *MemBus) Resume(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	held, ok := b.paused[job]
	if !ok {
		return
	}
	delete(b.paused, job)
	for i, m := range held {
		delays := make([]time.Duration, len(m.delays))
		for j, d := range m.delays {
			delays[j] = d + time.Duration(i+1)*time.Microsecond
		}
		b.sendLocked(m.to, m.raw, delays)
	}
}

// Stats returns the bus counters.
func (b *MemBus) Stats() MemBusStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Close stops every subscription and drops the deliveries still delayed.
func (b *MemBus) Close() {
	b.mu.Lock()
	subs := b.subs
	b.subs = make(map[string]*memSub)
	b.closed = true
	for t := range b.timers {
		if t.Stop() {
			b.wg.Done()
		}
	}
	clear(b.timers)
	b.due = nil
	b.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	b.wg.Wait()
}

// MemBusEndpoint is one server's messaging.Bus on a MemBus.
type MemBusEndpoint struct {
	bus  *MemBus
	from string
}

// Publish implements messaging.Bus.
func (e *MemBusEndpoint) Publish(ctx context.Context, to string, m messaging.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := jobid.Check(to); err != nil {
		return err
	}
	raw, err := messaging.Encode(m)
	if err != nil {
		return err
	}
	b := e.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.publishError != nil {
		if err := b.publishError(to, m); err != nil {
			b.stats.Failed++
			return fmt.Errorf("publish to %s: %w", to, err)
		}
	}
	b.stats.Published++
	var f Fault
	if b.fault != nil {
		f = b.fault(to, m)
	}
	if f.Drop || b.cut[e.from] || b.cut[to] {
		b.stats.Dropped++
		return nil
	}
	delays := []time.Duration{f.Delay}
	if f.Duplicate {
		delays = append(delays, f.Delay)
		b.stats.Duplicated++
	}
	if f.Echo > 0 {
		delays = append(delays, f.Delay+f.Echo)
		b.stats.Duplicated++
	}
	var latency time.Duration
	if b.latency != nil {
		latency = max(b.latency(to, m), 0)
	}
	for i, d := range delays {
		if d > 0 {
			b.stats.Delayed++
		}
		delays[i] = d + latency
	}
	if held, ok := b.paused[e.from]; ok {
		b.stats.Held++
		b.paused[e.from] = append(held, heldMessage{to: to, raw: raw, delays: delays})
		return nil
	}
	b.sendLocked(to, raw, delays)
	return nil
}

// sendLocked sends raw to to once per delay (at once for a delay of zero).
// b.mu must be held.
func (b *MemBus) sendLocked(to string, raw []byte, delays []time.Duration) {
	for _, d := range delays {
		if d <= 0 {
			b.deliverLocked(to, raw)
			continue
		}
		if b.closed {
			continue
		}
		b.seq++
		m := &dueMessage{at: b.clock.Now().Add(d), to: to, raw: raw, seq: b.seq}
		b.due = append(b.due, m)
		b.armLocked(d, m.at)
	}
}

// armLocked delivers what is due by at after d. b.mu must be held.
func (b *MemBus) armLocked(d time.Duration, at time.Time) {
	b.wg.Add(1)
	var t *clock.Timer
	t = b.clock.AfterFunc(d, func() {
		defer b.wg.Done()
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.timers, t)
		b.deliverDueLocked(at)
	})
	b.timers[t] = struct{}{}
}

// deliverDueLocked delivers the first of the delayed messages due by at
// (in time order and, at one instant, in the order of their content) and
// puts the others off by a nanosecond, so that one message arrives per
// instant: the timers of messages due at one instant fire on goroutines of
// their own, in the scheduler's order, and the first of them delivers;
// on a virtual clock what the receiver does about a message is then over
// before the next one arrives, instead of racing with it (four
// notifications of one key at one instant were one pull or two, as the
// scheduler had it). b.mu must be held.
func (b *MemBus) deliverDueLocked(at time.Time) {
	var now []*dueMessage
	b.due = slices.DeleteFunc(b.due, func(m *dueMessage) bool {
		if m.at.After(at) {
			return false
		}
		now = append(now, m)
		return true
	})
	if len(now) == 0 {
		return
	}
	first := slices.MinFunc(now, (*dueMessage).compare)
	if len(now) > 1 && !b.closed {
		later := at.Add(time.Nanosecond)
		for _, m := range now {
			if m != first {
				m.at = later
				b.due = append(b.due, m)
			}
		}
		b.armLocked(time.Nanosecond, later)
	}
	b.deliverLocked(first.to, first.raw)
}

// deliverLocked queues raw for the subscriber of to. b.mu must be held.
func (b *MemBus) deliverLocked(to string, raw []byte) {
	if held, ok := b.paused[to]; ok {
		b.stats.Held++
		b.paused[to] = append(held, heldMessage{to: to, raw: raw, delays: []time.Duration{0}})
		return
	}
	s := b.subs[to]
	if s == nil || b.cut[to] {
		b.stats.NoSubscriber++
		return
	}
	b.stats.Delivered++
	s.push(raw)
}

// Subscribe implements messaging.Bus.
func (e *MemBusEndpoint) Subscribe(job string, h messaging.Handler) (messaging.Subscription, error) {
	if err := jobid.Check(job); err != nil {
		return nil, err
	}
	b := e.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[job]; ok {
		return nil, fmt.Errorf("membus: %s already subscribed", job)
	}
	s := &memSub{bus: b, job: job, handler: h, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.subs[job] = s
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// memSub delivers one server's messages in order on its own goroutine.
type memSub struct {
	bus     *MemBus
	job     string
	handler messaging.Handler
	mu      sync.Mutex
	queue   [][]byte
	wake    chan struct{}
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func (s *memSub) push(raw []byte) {
	s.mu.Lock()
	s.queue = append(s.queue, raw)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *memSub) run() {
	defer s.wg.Done()
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			raw := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			m, err := messaging.Decode(raw, messaging.DefaultMaxMoveBytes)
			if err != nil {
				continue
			}
			select {
			case <-s.done:
				return
			default:
			}
			s.bus.mu.Lock()
			seen := s.bus.onDeliver
			s.bus.mu.Unlock()
			if seen != nil {
				seen(s.job, m)
			}
			s.handler(m)
		}
	}
}

func (s *memSub) stop() {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
}

// Unsubscribe implements messaging.Subscription.
func (s *memSub) Unsubscribe() error {
	b := s.bus
	b.mu.Lock()
	if b.subs[s.job] == s {
		delete(b.subs, s.job)
	}
	b.mu.Unlock()
	s.stop()
	return nil
}
