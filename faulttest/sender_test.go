//go:build linux

package faulttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/logtest"
	internalrecord "github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

const (
	// sendWithin bounds one Send of the sender.
	sendWithin = 5 * time.Second
	// loadWithin bounds the sender's final Join (and Release) of a profile.
	loadWithin = 30 * time.Second
	// senderCloseWithin bounds the sender's Node.Close.
	senderCloseWithin = 15 * time.Second
)

// msgRef names a message: its id is unique only in its profile's inbox
// (a stream id, "<ms>-<seq>"), so two profiles can have one id.
type msgRef struct{ key, id string }

// String is "key/id".
func (r msgRef) String() string { return r.key + "/" + r.id }

// sentMsg is one message whose Send answered an id.
type sentMsg struct {
	seq    int64
	amount int
}

// sender sends Gift messages to profiles from the test process, through a
// Node and a Driver of its own on the scenario's Redis and NATS (so every
// Send notifies the holder, as a game's admin tool would), and keeps the
// ledger of every message a Send acknowledged with an id. Its Driver has
// the gameserver's OnMessage, so the sender can load the profiles at the
// end.
type sender struct {
	t    testing.TB
	keys []string
	drv  *datadriver.Driver[Player]
	log  *logtest.Buffer

	mu    sync.Mutex
	seq   int64
	sent  map[msgRef]sentMsg // every message with an id
	order []msgRef           // in the order their Send returned
	errs  []string           // failed sends: stored or not, nobody knows

	stopSteady func() // nil unless the steady stream runs
}

// newSender starts the sender's Node ("sender") on the cluster's Redis and
// NATS node 0; it sends to keys. The Node is closed when the test ends.
func newSender(t testing.TB, c *cluster, bus *testsupport.NATSCluster, keys []string, tm timings) *sender {
	t.Helper()
	s := &sender{t: t, keys: keys, log: &logtest.Buffer{}, sent: make(map[msgRef]sentMsg)}
	// No retries: a Send retried after a reply was lost would store the
	// message twice, and the ledger would not know the second id.
	rdb := c.redis.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
	nc := bus.Connect(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := datadriver.NewNode(ctx, datadriver.NodeConfig{
		JobID: "sender", Redis: rdb, NATS: nc, Namespace: c.ns, Logger: s.log.Logger(slog.LevelInfo),
		Beat: tm.beat, PresenceTTL: tm.ttl,
	})
	if err != nil {
		t.Fatalf("sender node: %v", err)
	}
	t.Cleanup(func() {
		s.stop()
		cctx, ccancel := context.WithTimeout(context.Background(), senderCloseWithin)
		defer ccancel()
		if err := node.Close(cctx); err != nil {
			t.Errorf("close the sender's node: %v", err)
		}
		if t.Failed() {
			t.Logf("sender log:\n%s", s.log.String())
		}
	})
	s.drv, err = datadriver.NewDriver(node, datadriver.Config[Player]{
		Name:      driverName,
		Autosave:  -1,
		OnMessage: applyGift,
	})
	if err != nil {
		t.Fatalf("sender driver: %v", err)
	}
	return s
}

// applyGift is the gameserver's OnMessage, without its event.
func applyGift(d *Player, m datadriver.Message) error {
	var g Gift
	if err := m.Decode(&g); err != nil {
		return fmt.Errorf("decode gift %s: %w", m.ID, err)
	}
	d.ApplyGift(m.ID, g)
	return nil
}

// send sends one Gift to a random key and enters it in the ledger; it
// returns the message (a zero msgRef when Send failed).
func (s *sender) send(ctx context.Context) msgRef {
	key := s.keys[rand.IntN(len(s.keys))]
	s.mu.Lock()
	s.seq++
	g := Gift{Key: key, Seq: s.seq, Amount: 1 + int(s.seq%9)}
	s.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, sendWithin)
	defer cancel()
	id, err := s.drv.Send(sctx, key, g, datadriver.SendOptions{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.errs = append(s.errs, fmt.Sprintf("seq %d to %s: %v", g.Seq, key, err))
		}
		return msgRef{}
	}
	ref := msgRef{key, id}
	if _, dup := s.sent[ref]; dup {
		s.errs = append(s.errs, fmt.Sprintf("seq %d: %s answered twice", g.Seq, ref))
		return msgRef{}
	}
	s.sent[ref] = sentMsg{seq: g.Seq, amount: g.Amount}
	s.order = append(s.order, ref)
	return ref
}

// steady sends one message every period on a goroutine of its own until
// stop.
func (s *sender) steady(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.send(ctx)
			}
		}
	}()
	s.stopSteady = func() { cancel(); <-done }
}

// stop ends the steady stream and waits until its last Send has returned.
func (s *sender) stop() {
	if s.stopSteady != nil {
		s.stopSteady()
		s.stopSteady = nil
	}
}

// burst sends n messages one after another (beside the steady stream) and
// returns those that have an id. half, if not nil, is closed once n/2 have
// been sent.
func (s *sender) burst(n int, half chan<- struct{}) []msgRef {
	var refs []msgRef
	for i := range n {
		if i == n/2 && half != nil {
			close(half)
		}
		if ref := s.send(context.Background()); ref != (msgRef{}) {
			refs = append(refs, ref)
		}
	}
	return refs
}

// count is how many messages have an id so far.
func (s *sender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}

// failures are the sends that answered an error.
func (s *sender) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// ledger is a copy of every message that has an id.
func (s *sender) ledger() map[msgRef]sentMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.sent)
}

// load joins every key through the sender's driver (applying whatever its
// inbox holds), copies the data and releases the profile.
func (s *sender) load() map[string]Player {
	s.t.Helper()
	out := make(map[string]Player, len(s.keys))
	for _, k := range s.keys {
		ctx, cancel := context.WithTimeout(context.Background(), loadWithin)
		p, err := s.drv.Join(ctx, k)
		if err != nil {
			cancel()
			s.t.Fatalf("final load of %s: %v", k, err)
		}
		var d Player
		p.View(func(v *Player) {
			d = *v
			d.Got = maps.Clone(v.Got)
		})
		err = p.Release(ctx)
		cancel()
		if err != nil {
			s.t.Fatalf("release %s after the final load: %v", k, err)
		}
		out[k] = d
	}
	return out
}

// onceCheck compares the loaded data with the ledger: every message with an
// id applied exactly once, to its own profile, and nothing else applied.
type onceCheck struct {
	applied    int      // messages of the ledger found once in their profile
	lost, dups []string // ledger messages missing, or counted more than once
	stray      []string // ids in the data that the ledger does not have for that key
	gifts      []string // profiles whose Gifts is not the sum of their messages' Amounts
}

func checkOnce(ledger map[msgRef]sentMsg, data map[string]Player) onceCheck {
	var oc onceCheck
	add := func(list *[]string, format string, a ...any) {
		if len(*list) < 10 {
			*list = append(*list, fmt.Sprintf(format, a...))
		}
	}
	want := make(map[string]int, len(data)) // key → sum of Amounts
	for ref, m := range ledger {
		want[ref.key] += m.amount
		switch n := data[ref.key].Got[ref.id]; {
		case n == 0:
			add(&oc.lost, "%s (seq %d)", ref, m.seq)
		case n > 1:
			add(&oc.dups, "%s (seq %d) applied %d times", ref, m.seq, n)
		default:
			oc.applied++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		d := data[k]
		for id := range d.Got {
			if _, ok := ledger[msgRef{k, id}]; !ok {
				add(&oc.stray, "%s/%s", k, id)
			}
		}
		if d.Gifts != want[k] {
			add(&oc.gifts, "%s: Gifts %d, the messages sent to it add up to %d", k, d.Gifts, want[k])
		}
	}
	return oc
}

// ok reports whether the check found nothing wrong.
func (oc onceCheck) ok() bool {
	return len(oc.lost)+len(oc.dups)+len(oc.stray)+len(oc.gifts) == 0
}

// inboxes reads the messages waiting in the inboxes of keys, in one
// pipeline.
func (c *cluster) inboxes(keys []string) (map[msgRef]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmds := make([]*redis.XMessageSliceCmd, len(keys))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.XRange(ctx, internalrecord.InboxKey(internalrecord.Key(c.ns, driverName, k)), "-", "+")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read inboxes: %w", err)
	}
	refs := make(map[msgRef]bool)
	for i, cmd := range cmds {
		for _, m := range cmd.Val() {
			refs[msgRef{keys[i], m.ID}] = true
		}
	}
	return refs, nil
}

// mustInboxes is inboxes that fails the test on error.
func (c *cluster) mustInboxes(keys []string) map[msgRef]bool {
	c.t.Helper()
	refs, err := c.inboxes(keys)
	if err != nil {
		c.t.Fatal(err)
	}
	return refs
}

// appliedBy is the set of messages the servers' EvApplied events name.
func appliedBy(servers ...*server) map[msgRef]bool {
	refs := make(map[msgRef]bool)
	for _, s := range servers {
		for _, e := range s.events(EvApplied) {
			refs[msgRef{e.Key, e.Msg}] = true
		}
	}
	return refs
}
