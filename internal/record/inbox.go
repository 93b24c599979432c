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

	"github.com/ckernel/playerdata/internal/rscript"
)

// Message is one message in a profile's inbox.
type Message struct {
	// ID is the inbox entry's id: the Redis stream id, "<ms>-<seq>".
	ID string
	// Body is what the sender stored (opaque).
	Body []byte
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

// messages reads a flat {id, body, id, body, ...} answer.
func messages(v any) []Message {
	return pairsOf(v, func(id, body any) Message { return Message{ID: str(id), Body: blob(body)} })
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
// key, to run on its own or in a pipeline (see ParseSend for its answer).
func SendCall(key string, body []byte, a SendArgs) rscript.Call {
	digest := ""
	if a.IdempotencyKey != "" {
		digest = BodyDigest(body)
	}
	return rscript.Call{Script: sendScript, Keys: []string{key, InboxKey(key), IdemKey(key), IdemAtKey(key)},
		Args: []any{body, a.MaxInbox, a.IdempotencyKey, a.IdempotencyWindow.Milliseconds(), a.IdempotencyKeys, digest}}
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
	c := SendCall(key, body, a)
	v, err := c.Script.Run(ctx, rdb, c.Keys, c.Args...).Result()
	if err != nil {
		return SendResult{}, err
	}
	return ParseSend(v)
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
		s := func(name string) string { v, _ := e.Values[name].(string); return v }
		n, _ := strconv.Atoi(s(DeadTries))
		out = append(out, DeadLetter{ID: e.ID, MessageID: s(DeadID), Body: []byte(s(EntryBody)), IdempotencyKey: s(EntryIdemKey),
			Attempts: n, Err: s(DeadErr), Job: s(DeadJob)})
	}
	return out, nil
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
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	v, err := replayScript.Run(ctx, rdb, []string{key, InboxKey(key), DeadKey(key), TriesKey(key), IdemKey(key),
		IdemAtKey(key)}, args...).Result()
	if err != nil {
		return ReplayResult{}, err
	}
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
		b, _ := e.Values["b"].(string)
		out = append(out, Message{ID: e.ID, Body: []byte(b)})
	}
	return out, seq, nil
}
