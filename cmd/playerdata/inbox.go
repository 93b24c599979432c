package main

// A profile's messages as inspect and send show them: those waiting in the
// inbox (sent with Driver.Send, not yet applied and saved), how often each
// was refused, and those moved to the dead-letter stream after too many
// refusals. A holder applies a message and saves it in one script that
// deletes it from the inbox, so "applied but not saved" is never in Redis:
// what waits is not applied yet.
//
// The keys, beside the record in its Cluster slot:
//
//	<record>:inbox  stream: b = body, k = the sender's idempotency key (optional)
//	<record>:tries  hash: <msgid> = refusals, <msgid>:err = last error,
//	                <msgid>:job = the JobID that refused it last
//	<record>:dead   stream: b, id (the original id), n (attempts), err, job, k
//
// Missing keys read as empty.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
)

// maxShownMessages is how many waiting and dead-lettered messages are
// listed, each.
const maxShownMessages = 20

// inboxReport is the messages of one record, and its --json output.
type inboxReport struct {
	// Count is how many messages wait.
	Count int64 `json:"count"`
	// OldestID and OldestAt name the oldest waiting message and when it was
	// sent (Redis clock); OldestAgeMS is its age when read.
	OldestID    string     `json:"oldest_id,omitempty"`
	OldestAt    *time.Time `json:"oldest_at,omitempty"`
	OldestAgeMS *float64   `json:"oldest_age_ms,omitempty"`
	// Messages are the oldest waiting messages, at most 20.
	Messages []messageReport `json:"messages"`
	// Refused is how many waiting messages were refused at least once.
	Refused int `json:"refused"`
	// Dead is how many messages were dead-lettered; DeadMessages the
	// newest of them, at most 20.
	Dead         int64        `json:"dead"`
	DeadMessages []deadReport `json:"dead_messages"`
	// Meaning says what the waiting messages mean, from who holds the
	// profile (set by inspect and send).
	Meaning string `json:"meaning,omitempty"`
}

// messageReport is one waiting message.
type messageReport struct {
	ID      string     `json:"id"`
	At      *time.Time `json:"at,omitempty"` // sent (Redis clock)
	AgeMS   *float64   `json:"age_ms,omitempty"`
	Bytes   int        `json:"bytes"`
	IdemKey string     `json:"idempotency_key,omitempty"`
	// Refusals is how often a holder's OnMessage refused it; LastError and
	// RefusedBy are the last refusal's error and JobID.
	Refusals  int64  `json:"refusals"`
	LastError string `json:"last_error,omitempty"`
	RefusedBy string `json:"refused_by,omitempty"`
	// Damaged says what of it does not match its checksum: no server
	// applies it (each refuses it, until it is dead-lettered).
	Damaged string `json:"damaged,omitempty"`
}

// deadReport is one dead-lettered message.
type deadReport struct {
	ID         string     `json:"id"`           // its id in the dead-letter stream
	At         *time.Time `json:"at,omitempty"` // when it was dead-lettered (Redis clock)
	OriginalID string     `json:"original_id"`
	Attempts   int64      `json:"attempts"`
	LastError  string     `json:"last_error,omitempty"`
	RefusedBy  string     `json:"refused_by,omitempty"`
	IdemKey    string     `json:"idempotency_key,omitempty"`
	Bytes      int        `json:"bytes"`
	// Damaged says what of it does not match its checksums or form.
	Damaged string `json:"damaged,omitempty"`
}

// messageReads are the reads of a record's messages, queued on a pipeline
// of the record's node (they share its slot).
type messageReads struct {
	count, deadCount *redis.IntCmd
	waiting, dead    *redis.XMessageSliceCmd
	tries            *redis.MapStringStringCmd
}

// queueMessageReads queues the reads of record rk's messages on p.
func queueMessageReads(ctx context.Context, p redis.Pipeliner, rk string) *messageReads {
	return &messageReads{
		count:     p.XLen(ctx, record.InboxKey(rk)),
		waiting:   p.XRangeN(ctx, record.InboxKey(rk), "-", "+", maxShownMessages),
		tries:     p.HGetAll(ctx, record.TriesKey(rk)),
		deadCount: p.XLen(ctx, record.DeadKey(rk)),
		dead:      p.XRevRangeN(ctx, record.DeadKey(rk), "+", "-", maxShownMessages),
	}
}

// err is the first error of the reads (a missing key is no error).
func (m *messageReads) err() error {
	for _, c := range []redis.Cmder{m.count, m.waiting, m.tries, m.deadCount, m.dead} {
		if err := c.Err(); err != nil && err != redis.Nil {
			return err
		}
	}
	return nil
}

// report builds the report of the reads; now is the node's clock.
func (m *messageReads) report(now time.Time) *inboxReport {
	tries := m.tries.Val()
	rep := &inboxReport{Count: m.count.Val(), Dead: m.deadCount.Val(), Messages: []messageReport{}, DeadMessages: []deadReport{}}
	for _, x := range m.waiting.Val() {
		mr := messageReport{ID: x.ID, Bytes: len(str(x.Values[record.EntryBody])), IdemKey: str(x.Values[record.EntryIdemKey]),
			LastError: tries[x.ID+record.TriesErrSuffix], RefusedBy: tries[x.ID+record.TriesJobSuffix]}
		mr.Refusals, _ = strconv.ParseInt(tries[x.ID], 10, 64)
		if mr.Refusals > 0 {
			rep.Refused++
		}
		mr.At, mr.AgeMS = idTime(x.ID, now)
		if cf := record.MessageOf(x.ID, x.Values).Check(); cf != nil {
			mr.Damaged = cf.Why
		}
		rep.Messages = append(rep.Messages, mr)
	}
	if len(rep.Messages) > 0 {
		rep.OldestID, rep.OldestAt, rep.OldestAgeMS = rep.Messages[0].ID, rep.Messages[0].At, rep.Messages[0].AgeMS
	}
	for _, x := range m.dead.Val() {
		d := deadReport{ID: x.ID, OriginalID: str(x.Values[record.DeadID]), LastError: str(x.Values[record.DeadErr]),
			RefusedBy: str(x.Values[record.DeadJob]), IdemKey: str(x.Values[record.EntryIdemKey]), Bytes: len(str(x.Values[record.EntryBody]))}
		d.Attempts, _ = strconv.ParseInt(str(x.Values[record.DeadTries]), 10, 64)
		d.At, _ = idTime(x.ID, now)
		if cf := record.DeadLetterOf(x.ID, x.Values).Damaged; cf != nil {
			d.Damaged = cf.Why
		}
		rep.DeadMessages = append(rep.DeadMessages, d)
	}
	return rep
}

// readInbox reads the messages of record rk on its node (reads only), with
// the node's clock.
func (r *reader) readInbox(ctx context.Context, rk string) (*inboxReport, error) {
	node, err := r.nodeOf(ctx, rk)
	if err != nil {
		return nil, err
	}
	var (
		reads *messageReads
		clock *redis.TimeCmd
	)
	_, err = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		reads = queueMessageReads(ctx, p, rk)
		clock = p.Time(ctx)
		return nil
	})
	if err == nil {
		err = reads.err()
	}
	if err != nil {
		return nil, fmt.Errorf("read the messages of %s: %w", rk, err)
	}
	return reads.report(clock.Val()), nil
}

// idTime is when a stream entry id was written (its ms part), and its age
// at now; nils for an id of another form.
func idTime(id string, now time.Time) (*time.Time, *float64) {
	at := (record.Message{ID: id}).At()
	if at.IsZero() {
		return nil, nil
	}
	age := ms(now.Sub(at))
	return &at, &age
}

// str is a stream field's value as a string ("" when absent).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// String says it for people: "2 messages wait, the oldest 1718…-0, sent
// 2024-06-10 09:00:00.000 (3.20 s ago)".
func (r *inboxReport) String() string {
	if r.Count == 0 {
		return "empty"
	}
	s := fmt.Sprintf("%d %s", r.Count, plural(int(r.Count), "message waits", "messages wait"))
	if r.OldestID == "" {
		return s
	}
	s += ", the oldest " + r.OldestID
	if r.OldestAt != nil {
		s += fmt.Sprintf(", sent %s (%s ago)", r.OldestAt.Local().Format("2006-01-02 15:04:05.000"),
			human(msDuration(*r.OldestAgeMS).Round(time.Millisecond)))
	}
	if r.Refused > 0 {
		s += fmt.Sprintf("; %d refused at least once", r.Refused)
	}
	return s
}

// explain sets r.Meaning: what the waiting and dead-lettered messages mean,
// given who holds the profile's lock (holder "" when the lock is free or
// there is no record), whether the holder beats presence for it (flag) and
// its presence now (alive, stopped, unknown).
func (r *inboxReport) explain(holder string, flag bool, status string) {
	var s string
	switch {
	case r.Count == 0:
	case holder == "":
		s = "no server holds the profile: the next load applies them before its Join returns"
	case !flag:
		s = holder + " holds the profile without presence: it applies them at its next autosave or inbox pull, or the next load does"
	case status == "alive":
		s = holder + " holds the profile and reads alive: a live holder applies and saves a message in one step, within a " +
			"round trip of being told of it over NATS, else at its next autosave or inbox pull (its Autosave period); " +
			"one still here after that was refused by its OnMessage (counted below: the holder tries it again at its " +
			"autosaves until Config.MaxMessageAttempts, and playerdata replay has it tried now), or the holder cannot " +
			"write to Redis"
	case status == "stopped":
		s = holder + " holds the lock but reads stopped: nobody applies them until a load takes the lock over; that load applies them"
	default:
		s = holder + " holds the lock and its presence is unknown: they wait until it reads alive (and applies them) or " +
			"stopped (and the next load does)"
	}
	if r.Dead > 0 {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("%d %s refused Config.MaxMessageAttempts times and moved to the dead-letter stream, where no "+
			"server applies %s", r.Dead, plural(int(r.Dead), "message was", "messages were"), plural(int(r.Dead), "it", "them"))
	}
	r.Meaning = s
}
