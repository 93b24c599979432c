package datadriver

import (
	"fmt"
	"sync"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/msgpackwire"
)

// A target decodes a move's data off the move's path: the prepare is
// checked for well-formed msgpack only (a scan, no decode), so that the
// accept goes back at once; the data is decoded into T once the flip has
// landed (the commit, or the record, says so), before the profile is
// built, outside the driver's lock. A decode that fails then (a migration
// that fails, a value T cannot hold: the two servers' T or migrations
// differ) leaves the moved bytes in the record, where the source wrote
// them, and the target gives the lock back: a Join there is a normal load,
// answered like any load of that record.

// movedData is a pending move's data, decoded once.
type movedData[T any] struct {
	once    sync.Once
	data    T
	unknown *datacodec.Unknown
	err     error
}

// decode decodes in's data with the driver's codec, once (a later call
// waits for the first and answers the same).
func (in *moveIn[T]) decode(c *datacodec.Codec[T]) error {
	in.dec.once.Do(func() {
		in.dec.data, in.dec.unknown, in.dec.err = c.Decode(in.m.Data, in.m.Schema)
	})
	return in.dec.err
}

// wellFormed checks that data is one msgpack value and nothing after it
// (nil: no data, the defaults).
func wellFormed(data []byte) error {
	if data == nil {
		return nil
	}
	r := msgpackwire.Reader{B: data}
	if _, err := r.Skip(); err != nil {
		return err
	}
	if r.Off != len(data) {
		return fmt.Errorf("%d bytes after the value", len(data)-r.Off)
	}
	return nil
}
