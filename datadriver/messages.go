package datadriver

import (
	"context"
	"errors"
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

// Message is one message sent to a profile (Driver.Send): ID names it
// within its profile ("<ms>-<seq>"), At is when it was stored (Redis clock),
// Body is the msgpack-encoded value.
type Message struct {
	ID   string
	At   time.Time
	Body []byte
}

// Decode decodes the message's body into v (msgpack).
func (m Message) Decode(v any) error { return msgpack.Unmarshal(m.Body, v) }

// SendOptions tune one Send.
type SendOptions struct {
	// IdempotencyKey makes the Send safe to retry (docs/messages.md): a Send
	// with the key of an earlier one and the same body and profile stores
	// nothing and answers the first id; another body or profile within
	// Config.IdempotencyWindow fails with ErrIdempotencyConflict. Receipt,
	// when set, is filled with what the Send did once it answers an id.
	// default: none, nil
	IdempotencyKey string
	Receipt        *SendReceipt
}

// SendReceipt is what a Send did (SendOptions.Receipt).
type SendReceipt struct {
	Duplicate bool // an earlier Send with the same IdempotencyKey stored the message
	// Waiting: the message waits in the inbox; DeadLettered: a duplicate's
	// lies in the dead letters; neither: a duplicate's was applied.
	Waiting, DeadLettered bool
	Holder                string // the JobID of the profile's holder when the message was stored ("": none)
	Notified              bool   // the holder was told to pull its inbox
}

// maxIdempotencyKeyBytes bounds an idempotency key.
const maxIdempotencyKeyBytes = 256

// Send stores a message (body, msgpack-encoded) for key's profile, loaded
// anywhere or not: the holder, told over the bus, applies it at once, else
// the next load does (docs/messages.md). It answers the message id,
// ErrInboxFull, ErrTooLarge, ErrIdempotencyConflict or
// ErrTooManyIdempotencyKeys (nothing stored), ErrCorruptRecord, or
// ErrNotReplicated (stored). A Send that failed without an answer may have
// stored the message: retry it with the same IdempotencyKey.
func (d *Driver[T]) Send(ctx context.Context, key string, body any, o SendOptions) (string, error) {
	if err := validKey(key); err != nil {
		return "", fmt.Errorf("send: %w", err)
	}
	if len(o.IdempotencyKey) > maxIdempotencyKeyBytes {
		return "", fmt.Errorf("send %q: %w: the idempotency key is %d bytes, limit %d", key, ErrInvalidConfig,
			len(o.IdempotencyKey), maxIdempotencyKeyBytes)
	}
	b, err := msgpack.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("send %q: encode the body: %w", key, err)
	}
	if len(b) > d.cfg.MaxMessageBytes {
		return "", fmt.Errorf("send %q: %w: the body is %d bytes, limit %d", key, ErrTooLarge, len(b), d.cfg.MaxMessageBytes)
	}
	if err := d.claimIdempotencyKey(ctx, key, o, b); err != nil {
		return "", err
	}
	args := record.SendArgs{MaxInbox: d.cfg.MaxInbox, IdempotencyKey: o.IdempotencyKey,
		IdempotencyWindow: d.cfg.IdempotencyWindow, IdempotencyKeys: d.cfg.MaxIdempotencyKeys}
	res, acked, err := d.node.send(ctx, d.recordKey(key), b, args)
	if err = d.sendRefused(ctx, key, o, res, err); err != nil {
		return "", err
	}
	dup := res.Outcome == record.Duplicate
	if dup {
		d.tel.MessageSent(ctx, telemetry.SendDuplicate)
	} else {
		d.tel.MessageSent(ctx, telemetry.SendOK)
	}
	notified := res.State == record.MessageWaiting && d.tellHolder(ctx, key, res.Holder)
	if o.Receipt != nil {
		*o.Receipt = SendReceipt{Duplicate: dup, Waiting: res.State == record.MessageWaiting,
			DeadLettered: res.State == record.MessageDead, Holder: res.Holder.Job, Notified: notified}
	}
	if dup {
		d.log.Debug("message already sent under this idempotency key", "key", key, "id", res.ID,
			"state", string(res.State), "holder", res.Holder.Job)
		return res.ID, nil
	}
	d.log.Debug("message sent", "key", key, "id", res.ID, "holder", res.Holder.Job)
	if want := d.node.cfg.MinReplicas; want > 0 && acked < int64(want) {
		return res.ID, fmt.Errorf("send %q: %w: %d of %d replicas acknowledged within %s (the message is stored)", key,
			ErrNotReplicated, acked, want, d.node.cfg.ReplicaTimeout)
	}
	return res.ID, nil
}

// sendRefused is the error of a send.lua call that failed or stored
// nothing (nil when it stored the message or found it stored), counted.
func (d *Driver[T]) sendRefused(ctx context.Context, key string, o SendOptions, res record.SendResult, err error) error {
	switch {
	case err != nil:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return fmt.Errorf("send %q: %w", key, err)
	case res.Outcome == record.InboxFull:
		d.tel.MessageSent(ctx, telemetry.SendInboxFull)
		return fmt.Errorf("send %q: %w (%d messages wait)", key, ErrInboxFull, res.Count)
	case res.Outcome == record.SendCorrupt:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return fmt.Errorf("send: %w", d.corruptField(key, res.Corrupt))
	case res.Outcome == record.IdempotencyConflict:
		d.tel.MessageSent(ctx, telemetry.SendKeyConflict)
		return &IdempotencyConflictError{Key: key, IdempotencyKey: o.IdempotencyKey, Driver: d.cfg.Name, Owner: key,
			MessageID: res.ID, Window: d.cfg.IdempotencyWindow}
	case res.Outcome == record.TooManyKeys:
		d.tel.MessageSent(ctx, telemetry.SendKeysFull)
		return fmt.Errorf("send %q: %w: it remembers %d (MaxIdempotencyKeys), each inside its IdempotencyWindow (%s) "+
			"or with its message waiting or dead-lettered; nothing stored: retry once older keys pass their window",
			key, ErrTooManyIdempotencyKeys, res.Count, d.cfg.IdempotencyWindow)
	}
	return nil
}

// tellHolder tells holder, the session holding key's lock, that a message
// waits in the inbox, and reports whether anyone was told: this Node's
// profile at once, another server over the bus (fire and forget).
func (d *Driver[T]) tellHolder(ctx context.Context, key string, holder record.Lock) bool {
	switch {
	case holder.Token == "":
		return false
	case holder.Job == d.node.jobID:
		d.onNotify(key)
		return true
	}
	return d.node.handoff.Notify(ctx, d.cfg.Name, key, holder.Job)
}

// onNotify is the driver's notify handler: a message for key is in its
// inbox. A live profile of key pulls it on its owner (a notification during
// a pull makes it pull once more).
func (d *Driver[T]) onNotify(key string) {
	if p := d.lookup(key); p != nil {
		p.pullNow()
	}
}

// pullNow asks the owner to pull the inbox (non-blocking: one pending ask
// is enough).
func (p *Profile[T]) pullNow() {
	if p.d.cfg.OnMessage == nil {
		return
	}
	p.post(sigPull)
}

// catchUpDue reports whether the executor has inbox work to catch up with
// at its start (else no drain starts for it: most loads hand the executor
// out idle).
func (p *Profile[T]) catchUpDue() bool {
	return p.messagesPending() || (p.d.cfg.OnMessage != nil && p.w.inboxBehind())
}

// catchUpInbox runs when the owner starts: what the join applied and
// refused is written at once, and what the acquire's page did not hold is
// pulled.
func (p *Profile[T]) catchUpInbox() {
	if p.messagesPending() {
		if err := p.write(p.bg(), writeAutosave); err != nil && !p.stopping() {
			p.d.log.Debug("writing the messages a join applied failed; the next write carries them", "key", p.key,
				"err", err)
		}
	}
	if p.w.inboxBehind() {
		p.pullInbox(p.w.joinedTo()) // the join tried its page already
	}
}

// messagesPending reports whether messages were applied or refused since
// the last landed write.
func (p *Profile[T]) messagesPending() bool {
	p.dataMu.RLock()
	defer p.dataMu.RUnlock()
	return p.extras().inFlight()
}

// pullInbox reads the inbox after the message id after ("": all of it) a
// page at a time (each read bounded in bytes) and applies what it holds; each page's applications and refusals are
// written at once, so a message leaves the inbox within a round trip of
// its notification. It reports whether it read and wrote every page. On the
// owner.
func (p *Profile[T]) pullInbox(after string) bool {
	d := p.d
	if p.phaseNow() != phaseLive || d.cfg.OnMessage == nil {
		return false
	}
	// A pull reads every message its first page's counter includes: its own
	// writes, whose answers carry the counter, ask for another pull only
	// when a message came after that read (else a refused message would be
	// tried again at once, and dead-lettered within milliseconds). A pull
	// that stops early leaves seenSeq as it was, so the next save's counter
	// pulls again.
	_, prev := p.w.inboxSeqs()
	for first := true; ; first = false {
		ctx, cancel := d.node.clock.WithTimeout(p.bg(), d.node.cfg.SaveTimeout)
		msgs, seq, err := record.ReadInbox(ctx, d.node.rdb, d.recordKey(p.key), after, d.inboxPage())
		cancel()
		if err != nil {
			if !p.stopping() {
				d.log.Warn("pulling the inbox failed; the next save or notification tries again", "key", p.key, "err", err)
			}
			p.w.setSeenSeq(prev)
			return false
		}
		if first {
			known, _ := p.w.inboxSeqs()
			p.w.setInboxSeqs(max(known, seq), max(prev, seq))
		}
		if _, waiting := p.applyMessages(msgs); waiting {
			p.w.setSeenSeq(prev) // the save that learns the trade's outcome pulls again
			return false
		}
		if p.messagesPending() {
			if err := p.write(p.bg(), writeAutosave); err != nil {
				p.w.setSeenSeq(prev) // the next write carries them, and pulls again
				return false
			}
		}
		if len(msgs) < d.inboxPage() {
			return true
		}
		after = msgs[len(msgs)-1].ID
	}
}

// applyMessages applies the messages the profile has not applied yet, in
// order, each on a copy of the data: a message whose OnMessage fails or
// panics changes nothing, stays in the inbox, and its refusal is counted by
// the next write (after MaxMessageAttempts refusals it is dead-lettered;
// before, it is tried again: msgretry.go).
// Like Update it waits for a running trade, applies nothing to a profile
// that is not live (or whose lease has passed), and nothing while a trade's
// outcome is unknown (waiting: the trade's image, if it committed, replaces
// the data, and a message applied before would be lost with it while the
// save that settles the trade deletes it from the inbox). It reports how
// many it applied.
func (p *Profile[T]) applyMessages(msgs []record.Message) (n int, waiting bool) {
	d := p.d
	if d.cfg.OnMessage == nil || len(msgs) == 0 {
		return 0, false
	}
	p.dataMu.Lock()
	p.waitTradeLocked()
	defer p.dataMu.Unlock()
	if err := p.syncTradeLocked(); err != nil {
		d.log.Debug("messages wait for a trade's outcome", "key", p.key, "err", err)
		return 0, true
	}
	refused := 0
	x := p.extrasMade()
	for _, rm := range msgs {
		if slices.Contains(x.applied, rm.ID) || slices.ContainsFunc(x.refused, func(r record.Refusal) bool { return r.ID == rm.ID }) {
			continue
		}
		if p.updatable() != nil {
			break
		}
		if err := p.applyOne(rm); err != nil {
			x.refused = append(x.refused, record.Refusal{ID: rm.ID, Err: truncate(err.Error(), maxRefusalBytes)})
			refused++
			continue
		}
		x.applied = append(x.applied, rm.ID)
		n++
	}
	if n > 0 {
		d.tel.MessagesApplied(p.bg(), n)
		d.log.Debug("messages applied", "key", p.key, "count", n)
	}
	if refused > 0 {
		d.log.Debug("OnMessage refused messages; they stay in the inbox", "key", p.key, "count", refused)
	}
	return n, false
}

// applyOne applies one message to a copy of the data; the copy replaces the
// data when OnMessage accepts it. A message that does not match its
// checksum is refused (a *CorruptRecordError) without OnMessage seeing it.
// dataMu held.
func (p *Profile[T]) applyOne(rm record.Message) error {
	d := p.d
	if cf := rm.Check(); cf != nil {
		return &CorruptRecordError{Key: p.key, Path: cf.Field, Err: errors.New(cf.Why)}
	}
	next, err := d.codec.Clone(&p.data)
	if err != nil {
		return fmt.Errorf("copy the data: %w", err)
	}
	m := Message{ID: rm.ID, At: rm.At(), Body: rm.Body}
	var ferr error
	if perr := protect("OnMessage", func() { ferr = d.cfg.OnMessage(&next, m) }); perr != nil {
		d.logPanic(p.key, perr)
		return perr
	}
	if ferr != nil {
		return ferr
	}
	p.data = next
	return nil
}

// maxRefusalBytes bounds the refusal text kept with a message.
const maxRefusalBytes = 200

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// noteInbox records how many messages were ever sent, as a save or a load
// saw it, and pulls when that is more than the last pull saw (a
// notification was lost). On the owner.
func (p *Profile[T]) noteInbox(seq int64) {
	if known, seen := p.w.inboxSeqs(); seq > known {
		p.w.setInboxSeqs(seq, seen)
	}
	if p.w.inboxBehind() {
		p.pullNow()
	}
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
