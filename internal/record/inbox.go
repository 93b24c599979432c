package record

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	arr, _ := v.([]any)
	var out []Message
	for i := 0; i+1 < len(arr); i += 2 {
		out = append(out, Message{ID: str(arr[i]), Body: blob(arr[i+1])})
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
)

// SendResult is send.lua's answer.
type SendResult struct {
	Outcome SendOutcome
	ID      string // Sent: the message id
	// Holder is the session that holds the profile's lock now (Job and
	// Token; empty when nobody does): the server to notify.
	Holder Lock
	Count  int64 // InboxFull: the inbox size
}

// Send stores body in the inbox of the record at key, unless the inbox
// holds max messages already: one round trip (send.lua).
func Send(ctx context.Context, rdb redis.Scripter, key string, body []byte, max int) (SendResult, error) {
	v, err := sendScript.Run(ctx, rdb, []string{key, InboxKey(key)}, body, max).Result()
	if err != nil {
		return SendResult{}, err
	}
	arr, tag, err := tagged(v)
	if err != nil {
		return SendResult{}, err
	}
	switch tag {
	case "OK":
		return SendResult{Outcome: Sent, ID: str(elem(arr, 1)),
			Holder: Lock{Job: str(elem(arr, 2)), Token: str(elem(arr, 3))}}, nil
	case "FULL":
		return SendResult{Outcome: InboxFull, Count: num(elem(arr, 1))}, nil
	}
	return SendResult{}, fmt.Errorf("%w: send answered %q", ErrUnexpectedAnswer, tag)
}

// ReadInbox returns the oldest messages (at most max) of the inbox of the
// record at key after the message id after ("" for the oldest): a read, no
// state change.
func ReadInbox(ctx context.Context, rdb redis.Cmdable, key, after string, max int) ([]Message, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	entries, err := rdb.XRangeN(ctx, InboxKey(key), start, "+", int64(max)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(entries))
	for _, e := range entries {
		b, _ := e.Values["b"].(string)
		out = append(out, Message{ID: e.ID, Body: []byte(b)})
	}
	return out, nil
}
