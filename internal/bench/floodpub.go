package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ckernel/playerdata/messaging"
)

// rawMessage is one message of a flood: its subject and wire bytes.
type rawMessage struct {
	subject string
	data    []byte
}

// floodPublisher publishes its messages round and round, on its own NATS
// connection, at a set rate, until stopped.
type floodPublisher struct {
	nc   *nats.Conn
	msgs []rawMessage
	rate int // messages a second

	published atomic.Int64
	cancel    context.CancelFunc
	done      chan struct{}
	start     time.Time
	took      time.Duration
}

// floodTick is how often the publisher catches up with its rate: a sleep
// is about a millisecond at best, so it sends the messages due since the
// last tick in a burst.
const floodTick = time.Millisecond

// startFlood starts publishing msgs at rate on nc.
func startFlood(nc *nats.Conn, msgs []rawMessage, rate int) *floodPublisher {
	ctx, cancel := context.WithCancel(context.Background())
	p := &floodPublisher{nc: nc, msgs: msgs, rate: rate, cancel: cancel, done: make(chan struct{}), start: time.Now()}
	go p.run(ctx)
	return p
}

func (p *floodPublisher) run(ctx context.Context) {
	defer close(p.done)
	var sent int64
	for i := 0; ctx.Err() == nil; {
		due := int64(time.Since(p.start).Seconds() * float64(p.rate))
		for ; sent < due; sent++ {
			m := p.msgs[i]
			i = (i + 1) % len(p.msgs)
			if p.nc.Publish(m.subject, m.data) == nil {
				p.published.Add(1)
			}
		}
		time.Sleep(floodTick)
	}
}

// stop ends the flood and returns the rate it reached, messages a second.
func (p *floodPublisher) stop() float64 {
	p.cancel()
	<-p.done
	_ = p.nc.Flush()
	p.took = time.Since(p.start)
	return float64(p.published.Load()) / p.took.Seconds()
}

// forgedMessages are n messages anyone on the NATS server can send, with no
// key: release requests to the server of subject holder naming the keys
// among keys (and unheld ones), random tokens and requester names, half of
// them the requester forged, and replies to the server of subject waiter
// naming waited, one in replyEvery.
func forgedMessages(n int, rng *rand.Rand, holder, waiter, waited, forged string, keys []string, replyEvery int) ([]rawMessage, error) {
	msgs := make([]rawMessage, 0, n)
	for i := range n {
		var m messaging.Message
		to := holder
		if i%replyEvery == replyEvery-1 {
			m, to = messaging.Message{Type: messaging.TypeReply, Driver: driverName, Key: waited, Sender: "deaf"}, waiter
		} else {
			key := fmt.Sprintf("unheld-%d", rng.IntN(100_000))
			if rng.IntN(2) == 0 {
				key = keys[rng.IntN(len(keys))]
			}
			requester := forged
			if rng.IntN(2) == 0 {
				requester = fmt.Sprintf("forged-%d", rng.IntN(1000))
			}
			m = messaging.Message{Type: messaging.TypeRequest, Driver: driverName, Key: key, Requester: requester,
				Sender: requester, Token: fmt.Sprintf("%016x", rng.Uint64())}
		}
		data, err := messaging.Encode(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, rawMessage{subject: to, data: data})
	}
	return msgs, nil
}

// capture records the messages sent on subjects (a wildcard), up to max, as
// a peer that listens on the bus sees them.
type capture struct {
	mu   sync.Mutex
	msgs []rawMessage
	max  int
}

func (c *capture) record(m *nats.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.msgs) < c.max {
		c.msgs = append(c.msgs, rawMessage{subject: m.Subject, data: m.Data})
	}
}

func (c *capture) captured() []rawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rawMessage(nil), c.msgs...)
}

// sampler records the peak goroutine count and live heap of the process
// while it runs.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}

	goroutines int
	heap       uint64 // bytes of live heap objects
}

// sampleEvery is the sampler's period.
const sampleEvery = 2 * time.Millisecond

func startSampler() *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			s.goroutines = max(s.goroutines, runtime.NumGoroutine())
			metrics.Read(heap)
			if heap[0].Value.Kind() == metrics.KindUint64 {
				s.heap = max(s.heap, heap[0].Value.Uint64())
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks.
func (s *sampler) stop() (goroutines int, heapMiB float64) {
	s.cancel()
	<-s.done
	return s.goroutines, round1(float64(s.heap) / (1 << 20))
}
