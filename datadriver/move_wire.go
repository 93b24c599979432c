package datadriver

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/messaging"
)

// A move's steps travel as messaging.TypeMove messages on the servers'
// handoff subjects (signed with RequestKey like every other message); the
// message's Driver and Key name the profile, and its Body is a moveMsg:
//
//	source --prepare{id, to, expiry, window, data ...}--> target
//	target --accept{id, token} | refuse{id, reason}-----> source
//	source: move.lua flips the lock to the target's token (the commit point)
//	source --commit{id, token, ver, epoch, at ...}------> target

// moveStep is which step of a move a message is.
type moveStep string

const (
	stepPrepare moveStep = "prepare"
	stepAccept  moveStep = "accept"
	stepRefuse  moveStep = "refuse"
	stepCommit  moveStep = "commit"
)

// moveMsg is the body of a move message.
type moveMsg struct {
	Step moveStep `msgpack:"s"`
	ID   string   `msgpack:"i"`
	// Driver and Key come from the message, not the body.
	Driver string `msgpack:"-"`
	Key    string `msgpack:"-"`
	// From is the sender (the message's Sender), To the server the step is
	// addressed to.
	From string `msgpack:"-"`
	To   string `msgpack:"t,omitempty"`

	// Prepare: the expiry of the flip on the Redis clock (ms), and how far
	// ahead of the source's reckoning of the Redis clock it was (ms).
	Expiry int64 `msgpack:"e,omitempty"`
	Window int64 `msgpack:"w,omitempty"`
	// Prepare: the profile as the flip writes it (data, schema, min-reader,
	// user ids and metadata, encoded), and what the target's writer needs
	// to know of the record: the stored data's write time, the history's,
	// and the inbox as the source last saw it.
	Data      []byte `msgpack:"d,omitempty"`
	Schema    int    `msgpack:"v,omitempty"`
	SchemaMin int    `msgpack:"m,omitempty"`
	UIDs      []byte `msgpack:"u,omitempty"`
	Meta      []byte `msgpack:"x,omitempty"`
	HistAt    int64  `msgpack:"h,omitempty"`
	SeenSeq   int64  `msgpack:"q,omitempty"`

	// Accept and commit: the target's lock token; accept: whether its lock
	// carries the presence flag.
	Token    string `msgpack:"k,omitempty"`
	Presence bool   `msgpack:"f,omitempty"`
	// Commit: the record after the flip (ver, epoch, the data's write time,
	// the flip's Redis time, the inbox count).
	Ver      int64 `msgpack:"r,omitempty"`
	Epoch    int64 `msgpack:"p,omitempty"`
	At       int64 `msgpack:"a,omitempty"`
	LockAt   int64 `msgpack:"l,omitempty"`
	InboxSeq int64 `msgpack:"n,omitempty"`

	// Refuse: why.
	Reason MoveRefusal `msgpack:"y,omitempty"`
	Why    string      `msgpack:"z,omitempty"`
}

// message is m as a wire message (its Driver and Key in the message).
func (m moveMsg) message() (messaging.Message, error) {
	b, err := msgpack.Marshal(&m)
	if err != nil {
		return messaging.Message{}, fmt.Errorf("move %s: encode: %w", m.Step, err)
	}
	return messaging.Message{Type: messaging.TypeMove, Driver: m.Driver, Key: m.Key, Body: string(b)}, nil
}

// moveMsgOf reads a move message.
func moveMsgOf(wm messaging.Message) (moveMsg, error) {
	var m moveMsg
	if err := msgpack.Unmarshal([]byte(wm.Body), &m); err != nil {
		return moveMsg{}, fmt.Errorf("move message: %w", err)
	}
	if m.ID == "" {
		return moveMsg{}, fmt.Errorf("move message: no id")
	}
	m.Driver, m.Key, m.From = wm.Driver, wm.Key, wm.Sender
	return m, nil
}

// refusal is the refuse step answering prepare m.
func refusal(m moveMsg, reason MoveRefusal, why string) moveMsg {
	return moveMsg{Step: stepRefuse, ID: m.ID, Driver: m.Driver, Key: m.Key, To: m.From, Reason: reason, Why: why}
}
