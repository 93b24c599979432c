package datadriver

import (
	"time"
	"unsafe"

	"github.com/ckernel/playerdata/lockhandoff"
)

// SetMoveHook makes d call f at each point of a move of its profiles
// ("prepared", "accepted", "flipped"), on the moving profile's owner: a
// test stops there, crashes a server, or lets the move go on.
func SetMoveHook[T any](d *Driver[T], f func(point string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.moves.hook = f
}

// MovePrepare is a prepare a test hands a driver as if it came from the
// bus (PrepareMove).
type MovePrepare struct {
	ID, From, To string
	Window       time.Duration
	Data         []byte
	Schema       int
	SchemaMin    int
	Signed       bool
}

// MoveAnswer is a driver's answer to a prepare.
type MoveAnswer struct {
	Accepted bool
	Token    string
	Reason   MoveRefusal
}

// PrepareMove hands d the prepare of a move of key, as the Node's bus
// handler would, and returns its answer.
func PrepareMove[T any](d *Driver[T], key string, m MovePrepare) MoveAnswer {
	a := d.movePrepare(moveMsg{Step: stepPrepare, ID: m.ID, Driver: d.cfg.Name, Key: key, From: m.From, To: m.To,
		Expiry: d.node.clock.Now().Add(m.Window).UnixMilli(), Window: m.Window.Milliseconds(), Data: m.Data,
		Schema: m.Schema, SchemaMin: m.SchemaMin}, m.Signed)
	return MoveAnswer{Accepted: a.Step == stepAccept, Token: a.Token, Reason: a.Reason}
}

// WithoutHandoff gives cfg's driver locks without the presence flag, and
// has it answer no requests, on a Node whose handoff is on: a holder that
// goes only by age beside ones that beat.
func WithoutHandoff[T any](cfg *Config[T]) { cfg.noHandoff = true }

// HandoffStats returns the counters of n's lock handoff (the metrics count
// the same messages for an operator).
func (n *Node) HandoffStats() lockhandoff.Stats { return lockhandoff.Stats(n.handoff.Stats()) }

// HasDoneChannel reports whether p's Done channel has been made (it is
// made when first asked for).
func HasDoneChannel[T any](p *Profile[T]) bool { return p.done.Load() != nil }

// HasExtras reports whether p carries its extras (what few sessions use,
// made when first set), and on its executor's side.
func HasExtras[T any](p *Profile[T]) (game, executor bool) {
	return p.ext.Load() != nil, p.w.x != nil
}

// ProfileSize is the size of a Profile of T, without what it points to.
func ProfileSize[T any]() uintptr { return unsafe.Sizeof(Profile[T]{}) }

// LifeViewSize is the size of a profile's life view, without what it
// points to.
func LifeViewSize() uintptr { return unsafe.Sizeof(lifeView{}) }
