package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/ckernel/playerdata/datadriver"
)

// Messages is live message delivery: server A holds a profile, server B
// sends it a message with Driver.Send (send.lua, then a NATS notification
// to A); A pulls its inbox and applies the message with OnMessage. The
// delivery latency runs from Send's call on B to OnMessage running on A.
// One message at a time; A saves every 100 messages (a save removes applied
// messages from the inbox).
type Messages struct {
	Latency
	// SendMS is Send's own duration (one script round trip, then a NATS
	// publish).
	SendMS Latency `json:"send"`
	// AfterSendMS runs from Send's return to OnMessage. It can be negative:
	// the holder often applies the message before the sender's goroutine
	// runs again after the publish.
	AfterSendMS Latency `json:"after_send"`
}

// messagesWarmup messages are sent before the timed ones.
const messagesWarmup = 20

// messageTimeout bounds the wait for one message's delivery.
const messageTimeout = 5 * time.Second

// runMessages fills Result.Messages.
func (r *runner) runMessages(ctx context.Context) error {
	ns := r.ns("messages")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	// arrived receives the time OnMessage ran, and the message's number.
	type arrival struct {
		at time.Time
		n  int
	}
	arrived := make(chan arrival, 16)
	onMessage := func(d *profileData, m datadriver.Message) error {
		at := time.Now()
		var n int
		if err := m.Decode(&n); err != nil {
			return err
		}
		d.Level++
		select {
		case arrived <- arrival{at, n}:
		default:
		}
		return nil
	}
	holder, err := r.startServer(ctx, ns, "bench-holder-"+randomID(), nil,
		func(c *datadriver.Config[profileData]) { c.OnMessage = onMessage })
	if err != nil {
		return err
	}
	defer holder.close(ctx)
	sender, err := r.startServer(ctx, ns, "bench-sender-"+randomID(), nil,
		func(c *datadriver.Config[profileData]) { c.OnMessage = onMessage })
	if err != nil {
		return err
	}
	defer sender.close(ctx)

	const key = "inbox"
	p, err := holder.drv.Join(ctx, key)
	if err != nil {
		return err
	}
	defer func() { _ = p.Release(context.WithoutCancel(ctx)) }()
	var delivery, send, after []float64
	for i := range messagesWarmup + r.cfg.Messages {
		if i%100 == 99 {
			if err := p.Save(ctx); err != nil {
				return err
			}
		}
		start := time.Now()
		if _, err := sender.drv.Send(ctx, key, i, datadriver.SendOptions{}); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		sent := time.Now()
		var got arrival
		for got.n != i || got.at.IsZero() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case got = <-arrived:
			case <-time.After(messageTimeout):
				return fmt.Errorf("message %d was not applied within %s", i, messageTimeout)
			}
		}
		if i >= messagesWarmup {
			delivery = append(delivery, msOf(got.at.Sub(start)))
			send = append(send, msOf(sent.Sub(start)))
			after = append(after, msOf(got.at.Sub(sent)))
		}
	}
	m := &r.res.Messages
	m.Latency, m.SendMS, m.AfterSendMS = summarize(delivery), summarize(send), summarize(after)
	r.progress("  %d messages: from Send's call to OnMessage p50 %.3f ms, p99 %.3f ms (Send itself p50 %.3f ms)",
		m.N, m.P50MS, m.P99MS, m.SendMS.P50MS)
	return nil
}
