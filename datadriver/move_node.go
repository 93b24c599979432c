package datadriver

import (
	"sync"

	"github.com/ckernel/playerdata/internal/movestatus"
	"github.com/ckernel/playerdata/messaging"
)

// The Node's part of moves: it routes the move messages that arrive to the
// driver they name (answering a prepare for a driver it does not run
// itself), and hands an accept or refusal to the MoveTo waiting for it.

// moveWaits are the moves of this Node waiting for their target's answer,
// by move id.
type moveWaits struct {
	mu    sync.Mutex
	waits map[string]chan moveMsg
}

// wait registers move id; the channel receives its first answer. The
// caller calls done.
func (w *moveWaits) wait(id string) <-chan moveMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waits == nil {
		w.waits = make(map[string]chan moveMsg)
	}
	ch := make(chan moveMsg, 1)
	w.waits[id] = ch
	return ch
}

// done forgets move id.
func (w *moveWaits) done(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waits, id)
}

// answer hands m to the move waiting for it, if one is (a late, repeated
// or forged answer is dropped).
func (w *moveWaits) answer(m moveMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waits[m.ID]; ok {
		select {
		case ch <- m:
		default:
		}
	}
}

// onMove receives one move message from the bus (lockhandoff's delivery
// goroutine: it must not block). A prepare is answered by its driver, or
// refused here for a driver this Node does not run or once it is closing;
// a commit goes to its driver; an accept or refusal to the waiting move.
func (n *Node) onMove(wm messaging.Message) {
	m, err := moveMsgOf(wm)
	if err != nil {
		n.log.Debug("move: malformed message dropped", "from", wm.Sender, "err", err)
		return
	}
	signed := wm.MAC != "" // a bus with a key delivers a MAC only once verified
	switch m.Step {
	case stepAccept, stepRefuse:
		if m.To == n.jobID {
			n.moves.answer(m)
		}
		return
	case stepPrepare, stepCommit:
	case movestatus.StepQuery:
		n.answerMoveStatus(m, signed)
		return
	default:
		return
	}
	n.mu.Lock()
	d := n.drivers[m.Driver]
	closed := n.closed
	n.mu.Unlock()
	if m.Step == stepCommit {
		if d != nil {
			d.moveCommit(m)
		}
		return
	}
	var answer moveMsg
	select {
	case <-n.closing:
		answer = refusal(m, RefusedClosing, "the target's Node is closing")
	default:
		switch {
		case closed:
			answer = refusal(m, RefusedClosing, "the target's Node is closed")
		case n.draining.Load():
			answer = refusal(m, RefusedClosing, "the target's Node is draining")
		case d == nil:
			answer = refusal(m, RefusedNoDriver, "the target runs no driver "+m.Driver)
		default:
			answer = d.movePrepare(m, signed)
		}
	}
	n.sendMove(answer)
}

// sendMove sends move message m to m.To: on this goroutine when the
// handoff's publish path is idle (one attempt that never waits: the
// delivery goroutine can send the accept), else through its queue.
func (n *Node) sendMove(m moveMsg) bool {
	wm, err := m.message()
	if err != nil {
		n.log.Warn("move: message not sent", "err", err)
		return false
	}
	return n.handoff.SendMove(n.ctx, m.To, wm)
}
