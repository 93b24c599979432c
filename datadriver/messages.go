package datadriver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// Offline messages. A message for a profile (a gift, a grant, a refund) is
// stored in the profile's inbox, a Redis stream beside its record, whether
// the profile is loaded anywhere or not. The server holding the profile is
// told at once over the bus and pulls the inbox; a load pulls it too, before
// Join returns. OnMessage applies each message to a copy of the data, and
// the message leaves the inbox with the very save that writes the data it
// changed (save.lua deletes the ids in the same script), so a crash at any
// point keeps both the change and the message or neither: each message is
// applied exactly once per profile, across crashes, handoffs, adoptions and
// trades (a trade first saves the messages its participants applied).

// Message is one message sent to a profile with Driver.Send.
type Message struct {
	// ID names the message within its profile: its inbox entry id,
	// "<ms>-<seq>". Two profiles' messages may have the same ID: a game
	// that records the messages it applied keys them by profile and ID.
	ID string
	// At is when it was stored, on the Redis clock.
	At time.Time
	// Body is the sent value, encoded with msgpack.
	Body []byte
}

// Decode decodes the message's body into v (msgpack).
func (m Message) Decode(v any) error { return msgpack.Unmarshal(m.Body, v) }

// SendOption changes one Send.
type SendOption func(*sendOptions)

type sendOptions struct {
	idempotencyKey string
}

// IdempotencyKey makes a Send safe to retry: a Send to the same profile with
// the same key k within Config.IdempotencyWindow (and always while the first
// message waits in the inbox or is dead-lettered) stores nothing new and
// answers the first send's id, whether that message was applied yet or not.
// Use the id of what the message pays for (an order, a grant): a sender that
// retries until it gets an id applies the message exactly once.
func IdempotencyKey(k string) SendOption {
	return func(o *sendOptions) { o.idempotencyKey = k }
}

// maxIdempotencyKeyBytes bounds an idempotency key.
const maxIdempotencyKeyBytes = 256

// Send stores a message for key's profile: one round trip, one script, in
// the record's slot. body is encoded with msgpack. When a server holds the
// profile it is told at once (one bus message, fire and forget) and applies
// the message without waiting for an autosave; otherwise the next load
// applies it before Join returns. A notification that is lost costs at most
// one autosave period: every save tells its holder how many messages were
// ever sent. It answers the message id, ErrInboxFull when MaxInbox messages
// wait already, ErrTooLarge for a body over MaxMessageBytes (nothing stored
// either way), ErrInvalidKey, or ErrCorruptRecord when the record's keys are
// not what this library writes. With MinReplicas it waits for replicas and
// answers ErrNotReplicated (the message is stored) when too few acknowledge.
//
// A Send that fails without an answer (a timeout, a lost connection) may
// have stored the message: retry it with the same IdempotencyKey.
func (d *Driver[T]) Send(ctx context.Context, key string, body any, opts ...SendOption) (string, error) {
	var o sendOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := ValidKey(key); err != nil {
		return "", fmt.Errorf("send: %w", err)
	}
	if len(o.idempotencyKey) > maxIdempotencyKeyBytes {
		return "", fmt.Errorf("send %q: %w: the idempotency key is %d bytes, limit %d", key, ErrInvalidConfig,
			len(o.idempotencyKey), maxIdempotencyKeyBytes)
	}
	b, err := msgpack.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("send %q: encode the body: %w", key, err)
	}
	if len(b) > d.cfg.MaxMessageBytes {
		return "", fmt.Errorf("send %q: %w: the body is %d bytes, limit %d", key, ErrTooLarge, len(b), d.cfg.MaxMessageBytes)
	}
	args := record.SendArgs{MaxInbox: d.cfg.MaxInbox, IdempotencyKey: o.idempotencyKey,
		IdempotencyWindow: d.cfg.IdempotencyWindow, IdempotencyKeys: d.cfg.MaxIdempotencyKeys}
	res, acked, err := d.node.send(ctx, d.recordKey(key), b, args)
	switch {
	case err != nil:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return "", fmt.Errorf("send %q: %w", key, err)
	case res.Outcome == record.InboxFull:
		d.tel.MessageSent(ctx, telemetry.SendInboxFull)
		return "", fmt.Errorf("send %q: %w (%d messages wait)", key, ErrInboxFull, res.Count)
	case res.Outcome == record.SendCorrupt:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return "", fmt.Errorf("send: %w", d.corruptField(key, res.Corrupt))
	case res.Outcome == record.Duplicate:
		d.log.Debug("message already sent under this idempotency key", "key", key, "id", res.ID)
		return res.ID, nil
	}
	d.tel.MessageSent(ctx, telemetry.SendOK)
	if res.Holder.Token != "" {
		if res.Holder.Job == d.node.jobID {
			d.onNotify(key)
		} else {
			d.node.handoff.Notify(ctx, d.cfg.Name, key, res.Holder.Job)
		}
	}
	d.log.Debug("message sent", "key", key, "id", res.ID, "holder", res.Holder.Job)
	if want := d.node.cfg.MinReplicas; want > 0 && acked < int64(want) {
		return res.ID, fmt.Errorf("send %q: %w: %d of %d replicas acknowledged within %s (the message is stored)", key,
			ErrNotReplicated, acked, want, d.node.cfg.ReplicaTimeout)
	}
	return res.ID, nil
}

// onNotify is the driver's notify handler: a message for key is in its
// inbox. A live profile of key pulls it on a goroutine of its own (one pull
// at a time; a notification during a pull makes it pull again).
func (d *Driver[T]) onNotify(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.profiles[key]; p != nil {
		p.pullLocked()
	}
}

// pullLocked starts a pull of the inbox, or asks the running one to go
// again. d.mu held.
func (p *Profile[T]) pullLocked() {
	if p.state != stateActive || p.d.cfg.OnMessage == nil {
		return
	}
	if p.pulling {
		p.pullAgain = true
		return
	}
	p.pulling = p.d.goTracked(p.pull)
}

// pull reads the inbox and applies what it holds, until no notification
// came during the read. It holds the save slot, so that no save lands
// between the read and the application (a save deletes applied messages
// from the inbox and forgets them).
func (p *Profile[T]) pull() {
	d := p.d
	for {
		if err := p.pullOnce(); err != nil && p.ctx.Err() == nil {
			d.log.Warn("pulling the inbox failed; the next save or notification tries again", "key", p.key, "err", err)
		}
		d.mu.Lock()
		again := p.pullAgain && p.state == stateActive
		p.pullAgain, p.pulling = false, again
		d.mu.Unlock()
		if !again {
			return
		}
	}
}

// pullOnce is one read of the inbox and the application of its messages.
func (p *Profile[T]) pullOnce() error {
	d := p.d
	if err := p.lockSave(p.ctx); err != nil {
		return err
	}
	defer p.unlockSave()
	d.mu.Lock()
	seq := p.inboxSeq
	d.mu.Unlock()
	// Page by page, each read bounded in bytes (inboxPage).
	after := ""
	for {
		ctx, cancel := d.node.clock.WithTimeout(p.ctx, d.node.cfg.SaveTimeout)
		msgs, err := record.ReadInbox(ctx, d.node.rdb, d.recordKey(p.key), after, d.inboxPage())
		cancel()
		if err != nil {
			return err
		}
		if _, waiting := p.applyMessages(msgs); waiting {
			return nil // seenSeq stays: the save that learns the trade's outcome pulls again
		}
		if len(msgs) < d.inboxPage() {
			break
		}
		after = msgs[len(msgs)-1].ID
	}
	d.mu.Lock()
	p.seenSeq = max(p.seenSeq, seq)
	d.mu.Unlock()
	return nil
}

// applyMessages applies the messages the profile has not applied yet, in
// order, each on a copy of the data: a message whose OnMessage fails or
// panics changes nothing and stays in the inbox. Like Update it waits for a
// running trade, applies nothing to a profile that is not live (or whose
// lease has passed), and nothing while a trade's outcome is unknown
// (waiting: the trade's image, if it committed, replaces the data, and a
// message applied before would be lost with it while the save that settles
// the trade deletes it from the inbox). It reports how many it applied.
func (p *Profile[T]) applyMessages(msgs []record.Message) (n int, waiting bool) {
	d := p.d
	if d.cfg.OnMessage == nil || len(msgs) == 0 {
		return 0, false
	}
	p.dataMu.Lock()
	for p.gate != nil {
		g := p.gate
		p.dataMu.Unlock()
		<-g
		p.dataMu.Lock()
	}
	defer p.dataMu.Unlock()
	if err := p.syncTradeLocked(); err != nil {
		d.log.Debug("messages wait for a trade's outcome", "key", p.key, "err", err)
		return 0, true
	}
	for _, rm := range msgs {
		if slices.Contains(p.applied, rm.ID) {
			continue
		}
		if p.liveErr() != nil {
			return n, false
		}
		next, err := d.codec.Clone(&p.data)
		if err != nil {
			d.log.Error("cannot copy the data to apply a message", "key", p.key, "err", err)
			return n, false
		}
		m := Message{ID: rm.ID, At: rm.At(), Body: rm.Body}
		var ferr error
		if perr := protect("OnMessage", func() { ferr = d.cfg.OnMessage(&next, m) }); perr != nil {
			d.logPanic(p.key, perr)
			continue
		}
		if ferr != nil {
			d.log.Warn("OnMessage refused a message; it stays in the inbox", "key", p.key, "id", m.ID, "err", ferr)
			continue
		}
		p.data = next
		p.applied = append(p.applied, m.ID)
		n++
	}
	if n > 0 {
		d.tel.MessagesApplied(p.ctx, n)
		d.log.Debug("messages applied", "key", p.key, "count", n)
	}
	return n, false
}

// noteInboxLocked records how many messages were ever sent, as a save or a
// load saw it, and pulls when that is more than the last pull saw (a
// notification was lost). d.mu held.
func (p *Profile[T]) noteInboxLocked(seq int64) {
	if seq > p.inboxSeq {
		p.inboxSeq = seq
	}
	if p.inboxSeq > p.seenSeq {
		p.pullLocked()
	}
}

// forgetApplied drops ids a landed save deleted from the inbox. dataMu
// held.
func (p *Profile[T]) forgetAppliedLocked(ids []string) {
	if len(ids) == 0 {
		return
	}
	p.applied = slices.DeleteFunc(p.applied, func(id string) bool { return slices.Contains(ids, id) })
}

// inboxPageBytes bounds the bytes of messages an acquire reads with the
// record: a profile with a large inbox never holds Redis for long, for
// anyone; its holder pulls the rest after the join, a page at a time.
const inboxPageBytes = 256 << 10

// inboxPage is how many messages one read of an inbox asks for: as many as
// fit in inboxPageBytes at MaxMessageBytes each, at least one.
func (d *Driver[T]) inboxPage() int {
	return max(1, min(d.cfg.MaxInbox, inboxPageBytes/d.cfg.MaxMessageBytes))
}
