// Package movestatus is the wire form of a move status query: a tool
// (playerdata inspect --nats) asks the server that holds a profile which
// move of it is in flight, and the server answers with the move's id and
// state as the source knows them (PREPARED: the prepare is out, no answer
// yet; ACCEPTED: the target accepted, the flip is sent or about to be).
// A move that ended is in the record (COMMITTED by its flip, CANCELLED by
// movemark.lua), so no server has to be asked about it.
//
// Both travel as messaging.TypeMove messages on the servers' subjects,
// beside a move's own steps (datadriver's move_wire.go), whose body keys
// "s" (the step) and "i" (an id) they share; a server that does not know
// the query drops it as an unknown step.
package movestatus

import (
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/messaging"
)

// The steps of a status query.
const (
	// StepQuery asks the receiver which move of the message's Driver/Key
	// is in flight there.
	StepQuery = "query"
	// StepStatus answers a query.
	StepStatus = "status"
)

// ErrNotStatus is Parse's answer to a message that is not a status answer.
var ErrNotStatus = errors.New("movestatus: not a status answer")

// Status is a query (Step StepQuery, ID the query's id) or its answer
// (Step StepStatus, the same ID, and the move in flight, if any).
type Status struct {
	Step string `msgpack:"s"`
	ID   string `msgpack:"i"`
	// Move is the id of the move in flight ("" for none); State its state
	// (record.MovePrepared or record.MoveAccepted); From and To its source
	// and target JobIDs.
	Move  string `msgpack:"mv,omitempty"`
	State string `msgpack:"ms,omitempty"`
	From  string `msgpack:"mf,omitempty"`
	To    string `msgpack:"mt,omitempty"`
}

// Query is the query with id for driver's key.
func Query(driver, key, id string) (messaging.Message, error) {
	return Status{Step: StepQuery, ID: id}.Message(driver, key)
}

// Message is s as a wire message about driver's key.
func (s Status) Message(driver, key string) (messaging.Message, error) {
	b, err := msgpack.Marshal(&s)
	if err != nil {
		return messaging.Message{}, fmt.Errorf("movestatus: encode: %w", err)
	}
	return messaging.Message{Type: messaging.TypeMove, Driver: driver, Key: key, Body: string(b)}, nil
}

// Parse reads a status answer (ErrNotStatus for any other message).
func Parse(wm messaging.Message) (Status, error) {
	var s Status
	if err := msgpack.Unmarshal([]byte(wm.Body), &s); err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrNotStatus, err)
	}
	if s.Step != StepStatus || s.ID == "" {
		return Status{}, ErrNotStatus
	}
	return s, nil
}
