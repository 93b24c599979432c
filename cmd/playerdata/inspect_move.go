package main

// inspect --nats: the move of a profile in flight. The record holds a
// move's end (COMMITTED, written by the flip; CANCELLED, by the source once
// the move failed); PREPARED and ACCEPTED last a round trip and live only
// on the source, which answers a status query on the bus.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/ckernel/playerdata/internal/movestatus"
	"github.com/ckernel/playerdata/messaging"
)

// moveAskWait bounds the wait for the holder's answer to a status query.
const moveAskWait = 2 * time.Second

// askMoveInFlight asks the lock's holder of rep's profile which move of it
// is in flight, with --nats, and fills rep.MoveInFlight (or says in
// rep.MoveQuery why it is unknown). Only a failure to reach NATS is an
// error.
func askMoveInFlight(ctx context.Context, r *reader, af *adminFlags, rep *inspectReport, stderr io.Writer) error {
	url := af.natsServer()
	switch {
	case url == "":
		rep.MoveQuery = "not asked (no --nats): a move in flight (PREPARED, ACCEPTED) is known only to its source"
		return nil
	case rep.Lock == nil || !rep.Lock.Held:
		rep.MoveQuery = "no holder to ask: no move is in flight"
		return nil
	}
	a, err := openAsker(ctx, r, af, "inspect", url, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	var rnd [8]byte
	if _, err := crand.Read(rnd[:]); err != nil {
		return err
	}
	id := hex.EncodeToString(rnd[:])
	answers := make(chan movestatus.Status, 1)
	a.h.HandleMoves(func(wm messaging.Message) {
		if s, err := movestatus.Parse(wm); err == nil && s.ID == id && wm.Sender == rep.Lock.Holder {
			select {
			case answers <- s:
			default:
			}
		}
	})
	q, err := movestatus.Query(rep.Driver, rep.Key, id)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, moveAskWait)
	defer cancel()
	if !a.h.SendMove(actx, rep.Lock.Holder, q) {
		return fmt.Errorf("ask %s over NATS: the question was not sent", rep.Lock.Holder)
	}
	select {
	case s := <-answers:
		if s.Move == "" {
			rep.MoveQuery = fmt.Sprintf("%s answered: no move in flight", rep.Lock.Holder)
			return nil
		}
		rep.MoveInFlight = &moveReport{ID: s.Move, State: s.State, From: s.From, To: s.To}
	case <-actx.Done():
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.MoveQuery = fmt.Sprintf("%s did not answer within %v (not running, another subject prefix or request key, "+
			"or a build without status answers)", rep.Lock.Holder, moveAskWait)
	}
	return nil
}
