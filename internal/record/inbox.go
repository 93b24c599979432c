package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/checksum"
	"github.com/ckernel/playerdata/internal/rscript"
)

// Message is one message in a profile's inbox.
type Message struct {
	// ID is the inbox entry's id: the Redis stream id, "<ms>-<seq>".
	ID string
	// Body is what the sender stored (opaque); Key its idempotency key
	// ("": none).
	Body []byte
	Key  string
	// Sum is the entry's checksum (EntrySum of its key and body), "" for
	// an entry an earlier build sent (unchecked).
	Sum string
}

// EntrySum is the checksum of an inbox entry (field EntrySumField):
// CRC-32C of its idempotency key and body, each length-prefixed, as 8 hex
// digits. Send computes it; a dead letter keeps it; a read checks it.
func EntrySum(key string, body []byte) string { return checksum.Of([]byte(key), body) }

// Check says whether the entry is as its sender stored it: nil, or a
// *CorruptField naming the inbox entry.
func (m Message) Check() *CorruptField {
	if m.Sum != "" && m.Sum != EntrySum(m.Key, m.Body) {
		return &CorruptField{Field: "inbox " + m.ID, Why: "its body or idempotency key does not match its checksum (" +
			EntrySumField + "): damaged"}
	}
	return nil
}

// At is when the message was stored, on the Redis clock (the ms its id
// starts with); zero for an id of another form.
func (m Message) At() time.Time {
	ms, _, ok := strings.Cut(m.ID, "-")
	if !ok {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// messages reads a flat {id, body, key, sum, ...} answer.
func messages(v any) []Message {
	arr, _ := v.([]any)
	var out []Message
	for i := 0; i+3 < len(arr); i += 4 {
		out = append(out, Message{ID: str(arr[i]), Body: blob(arr[i+1]), Key: str(arr[i+2]), Sum: str(arr[i+3])})
	}
	return out
}

// SendOutcome is what a send did.
type SendOutcome int

const (
	// Sent: the message is in the inbox (SendResult.ID).
	Sent SendOutcome = iota + 1
	// InboxFull: the inbox holds SendResult.Count messages already, the
	// most allowed; nothing was stored.
	InboxFull
	// Duplicate: an earlier send with the same idempotency key stored
	// SendResult.ID; nothing was stored.
	Duplicate
	// SendCorrupt: a key or field of the record is not what this library
	// writes (SendResult.Corrupt); nothing was stored.
	SendCorrupt
	// IdempotencyConflict: the idempotency key names message SendResult.ID,
	// whose body is another; nothing was stored.
	IdempotencyConflict
	// TooManyKeys: the profile remembers SendResult.Count idempotency keys,
	// the most allowed, none of them forgettable yet; nothing was stored.
	TooManyKeys
)

// MessageState is where a message is, as a duplicate send found it.
type MessageState string

// The states of a duplicate's message.
const (
	MessageWaiting MessageState = "waiting" // in the inbox
	MessageDead    MessageState = "dead"    // a dead letter
	MessageApplied MessageState = "applied" // applied and saved: no longer in the inbox
)

// SendArgs are the arguments of send.lua beside the body.
type SendArgs struct {
	// MaxInbox is the most messages the inbox may hold.
	MaxInbox int
	// IdempotencyKey, when not empty, names the message: a profile that
	// remembers the key stores nothing, and answers the first id when the
	// body is the same (a digest of it is kept with the key), a conflict
	// otherwise.
	IdempotencyKey string
	// IdempotencyWindow is how long a key is remembered after its send (and
	// always while its message waits or is dead-lettered); IdempotencyKeys
	// bounds how many a profile remembers: at the bound a keyed send is
	// refused (TooManyKeys).
	IdempotencyWindow time.Duration
	IdempotencyKeys   int
}

// SendResult is send.lua's answer.
type SendResult struct {
	Outcome SendOutcome
	ID      string // Sent, Duplicate and IdempotencyConflict: the message id
	// State is where a Duplicate's message is.
	State MessageState
	// Holder is the session that holds the profile's lock now (Job and
	// Token; empty when nobody does): the server to notify.
	Holder  Lock
	Count   int64        // InboxFull: the inbox size; TooManyKeys: the keys remembered
	Corrupt CorruptField // SendCorrupt: what is wrong
}

// SendCall is the send.lua call storing body in the inbox of the record at
// key, to run on its own or in a pipeline, with the reader of its answer.
func SendCall(key string, body []byte, a SendArgs) rscript.Pending[SendResult] {
	return sendScript.Call(key, sendCall{body: body, args: a})
}

// sendCall is what one send.lua call is made of.
type sendCall struct {
	body []byte
	args SendArgs
}

// keys are KEYS of send.lua for the record at key.
func (c sendCall) keys(key string) []string {
	return []string{key, InboxKey(key), IdemKey(key), IdemAtKey(key)}
}

// argv is ARGV of send.lua.
func (c sendCall) argv() []any {
	a, digest := c.args, ""
	if a.IdempotencyKey != "" {
		digest = BodyDigest(c.body)
	}
	return []any{c.body, a.MaxInbox, a.IdempotencyKey, a.IdempotencyWindow.Milliseconds(), a.IdempotencyKeys, digest,
		EntrySum(a.IdempotencyKey, c.body)}
}

// parseSendCall reads the ARGV of an observed send.lua call (the digest and
// checksum it carries are computed from the body, so they are not read).
func parseSendCall(argv []string) (sendCall, error) {
	if err := wantArgs(ScriptSend, argv, 7); err != nil {
		return sendCall{}, err
	}
	c := sendCall{body: []byte(arg(argv, 1)), args: SendArgs{IdempotencyKey: arg(argv, 3)}}
	c.args.MaxInbox, _ = strconv.Atoi(arg(argv, 2))
	ms, _ := strconv.ParseInt(arg(argv, 4), 10, 64)
	c.args.IdempotencyWindow = time.Duration(ms) * time.Millisecond
	c.args.IdempotencyKeys, _ = strconv.Atoi(arg(argv, 5))
	return c, nil
}

// BodyDigest is the digest of a message body kept with its idempotency key:
// the first 128 bits of its SHA-256, in hex.
func BodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

// Send stores body in the inbox of the record at key, unless the inbox
// holds a.MaxInbox messages already or an earlier send had the same
// idempotency key: one round trip (send.lua).
func Send(ctx context.Context, rdb redis.Scripter, key string, body []byte, a SendArgs) (SendResult, error) {
	return sendScript.Run(ctx, rdb, key, sendCall{body: body, args: a})
}

// ParseSend reads send.lua's answer.
func ParseSend(v any) (SendResult, error) {
	arr, tag, err := tagged(v)
	if err != nil {
		return SendResult{}, err
	}
	switch tag {
	case "OK", "DUP":
		res := SendResult{Outcome: Sent, ID: str(elem(arr, 1)), Holder: Lock{Job: str(elem(arr, 2)), Token: str(elem(arr, 3))},
			State: MessageWaiting}
		if tag == "DUP" {
			res.Outcome, res.State = Duplicate, MessageState(str(elem(arr, 4)))
		}
		return res, nil
	case "CONFLICT":
		return SendResult{Outcome: IdempotencyConflict, ID: str(elem(arr, 1))}, nil
	case "KEYS":
		return SendResult{Outcome: TooManyKeys, Count: num(elem(arr, 1))}, nil
	case "FULL":
		return SendResult{Outcome: InboxFull, Count: num(elem(arr, 1))}, nil
	case "CORRUPT":
		return SendResult{Outcome: SendCorrupt, Corrupt: CorruptField{Field: str(elem(arr, 1)), Why: str(elem(arr, 2))}}, nil
	}
	return SendResult{}, fmt.Errorf("%w: send answered %q", ErrUnexpectedAnswer, tag)
}

// DeadLetter is a message moved out of a profile's inbox after OnMessage
// refused it too often.
type DeadLetter struct {
	// ID is the dead letter's id (in the dead-letter stream); MessageID the
	// message's inbox id.
	ID, MessageID string
	// Body is what the sender stored; IdempotencyKey the sender's key ("":
	// none).
	Body           []byte
	IdempotencyKey string
	// Attempts is how many times it was refused; Err the last refusal, by
	// the server Job.
	Attempts int
	Err, Job string
	// Damaged says what of the entry is not as written (nil: it is, as far
	// as its checksums and form tell).
	Damaged *CorruptField
}

// ReadDeadLetters returns the oldest dead letters (at most max) of the
// record at key: a read, no state change.
func ReadDeadLetters(ctx context.Context, rdb redis.Cmdable, key string, max int) ([]DeadLetter, error) {
	entries, err := rdb.XRangeN(ctx, DeadKey(key), "-", "+", int64(max)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, 0, len(entries))
	for _, e := range entries {
		out = append(out, DeadLetterOf(e.ID, e.Values))
	}
	return out, nil
}

// DeadLetterOf reads dead letter id's fields, checking them: its message
// against its checksum (c), its refusal against its own (d), and the count
// and id as what the scripts write.
func DeadLetterOf(id string, vals map[string]any) DeadLetter {
	s := func(name string) string { v, _ := vals[name].(string); return v }
	n, err := strictUint(s(DeadTries), 1<<31)
	d := DeadLetter{ID: id, MessageID: s(DeadID), Body: []byte(s(EntryBody)), IdempotencyKey: s(EntryIdemKey),
		Attempts: int(n), Err: s(DeadErr), Job: s(DeadJob)}
	msg := Message{ID: d.MessageID, Body: d.Body, Key: d.IdempotencyKey, Sum: s(EntrySumField)}
	field := func(why string) *CorruptField { return &CorruptField{Field: "dead " + id, Why: why} }
	sum, count, _ := strings.Cut(s(DeadSum), ",")
	switch {
	case msg.Check() != nil:
		d.Damaged = field("its body or idempotency key does not match its checksum (" + EntrySumField + ")")
	case sum != "" && sum != RefusalSum(d.MessageID, d.Err, d.Job):
		d.Damaged = field("its message id, error or server does not match its checksum (" + DeadSum + ")")
	case sum != "" && count != s(DeadTries):
		d.Damaged = field(fmt.Sprintf("its refusal count %q disagrees with its checksum, which says %q", s(DeadTries), count))
	case err != nil || n == 0:
		d.Damaged = field(fmt.Sprintf("its refusal count %q is not a positive integer", s(DeadTries)))
	case !validStreamID(d.MessageID):
		d.Damaged = field(fmt.Sprintf("its message id %q is not a stream id", d.MessageID))
	}
	return d
}

// RefusalSum is the checksum of a refusal as a dead letter keeps it
// (field DeadSum): of the message id, the error and the server.
func RefusalSum(id, err, job string) string { return checksum.Of([]byte(id), []byte(err), []byte(job)) }

// validStreamID reports whether id is "<ms>-<seq>", as Redis writes one.
func validStreamID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	_, err1 := strictUint(ms, 1<<62)
	_, err2 := strictUint(seq, 1<<62)
	return ok && err1 == nil && err2 == nil
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	// Moved counts the dead letters put back in the inbox; Retried the
	// waiting messages whose refusal count was dropped.
	Moved, Retried int
	// Holder is the session that holds the profile's lock (to notify).
	Holder Lock
	// Corrupt, when Field is set, says which key is not what this library
	// writes (nothing was changed).
	Corrupt CorruptField
}

// Replay has messages of the record at key tried again, by their ids (all
// of them when ids is empty: every dead letter, up to 1000, and every
// waiting message refused at least once): a dead letter moves back to the
// inbox with its body and idempotency key, under a new id; a message
// waiting in the inbox stays, its refusal count dropped. Ids that name
// neither are passed over. One round trip (replay.lua).
func Replay(ctx context.Context, rdb redis.Scripter, key string, ids []string) (ReplayResult, error) {
	return replayScript.Run(ctx, rdb, key, ReplayArgs{IDs: ids})
}

// ReplayArgs are replay.lua's arguments: the ids of the messages to try
// again (none: every dead letter and every refused waiting message).
type ReplayArgs struct {
	IDs []string
}

// keys are KEYS of replay.lua: the record, its inbox, dead letters,
// refusal counts and idempotency keys.
func (a ReplayArgs) keys(key string) []string {
	return []string{key, InboxKey(key), DeadKey(key), TriesKey(key), IdemKey(key), IdemAtKey(key)}
}

// argv is ARGV of replay.lua.
func (a ReplayArgs) argv() []any {
	args := make([]any, len(a.IDs))
	for i, id := range a.IDs {
		args[i] = id
	}
	return args
}

// ParseReplayArgs reads the ARGV of an observed replay.lua call.
func ParseReplayArgs(argv []string) (ReplayArgs, error) {
	if len(argv) == 0 {
		return ReplayArgs{}, nil
	}
	return ReplayArgs{IDs: append([]string(nil), argv...)}, nil
}

// parseReplay reads replay.lua's answer.
func parseReplay(v any) (ReplayResult, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 3 {
		return ReplayResult{}, fmt.Errorf("%w: replay answered %v", ErrUnexpectedAnswer, v)
	}
	if tag, _ := arr[0].(string); tag == "CORRUPT" {
		return ReplayResult{Corrupt: CorruptField{Field: str(arr[1]), Why: str(arr[2])}}, nil
	}
	return ReplayResult{Moved: int(num(arr[0])), Holder: Lock{Job: str(arr[1]), Token: str(arr[2])},
		Retried: int(num(elem(arr, 3)))}, nil
}

// ReadInbox returns the oldest messages (at most max) of the inbox of the
// record at key after the message id after ("" for the oldest), and how many
// messages were ever sent to the profile (FieldInboxSeq), read first in the
// same round trip: every message that count includes was in the inbox, or
// had left it, when the page was read. A read, no state change.
func ReadInbox(ctx context.Context, rdb redis.Cmdable, key, after string, max int) ([]Message, int64, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	pipe := rdb.Pipeline()
	seqCmd := pipe.HGet(ctx, key, FieldInboxSeq)
	rangeCmd := pipe.XRangeN(ctx, InboxKey(key), start, "+", int64(max))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, err
	}
	seq, err := seqCmd.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("%w: %s %q: %v", ErrUnexpectedAnswer, FieldInboxSeq, seqCmd.Val(), err)
	}
	entries, err := rangeCmd.Result()
	if err != nil {
		return nil, 0, err
	}
	out := make([]Message, 0, len(entries))
	for _, e := range entries {
		out = append(out, MessageOf(e.ID, e.Values))
	}
	return out, seq, nil
}

// MessageOf reads inbox entry id's fields (Message.Check checks them).
func MessageOf(id string, vals map[string]any) Message {
	s := func(name string) string { v, _ := vals[name].(string); return v }
	return Message{ID: id, Body: []byte(s(EntryBody)), Key: s(EntryIdemKey), Sum: s(EntrySumField)}
}
