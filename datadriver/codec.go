package datadriver

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// codec encodes profile data as msgpack and decodes stored data over a copy
// of the driver's defaults.
//
// The merge is by top-level field: a field present in the stored data
// replaces the default entirely (a map or slice is not merged into the
// default's), and a field absent from it (added to T after the record was
// written) takes its default. Decoding into a pre-filled value would merge
// maps key by key and could resurrect default entries a player no longer has.
type codec[T any] struct {
	defaults    []byte                        // msgpack of Config.Defaults
	defaultsMap map[string]msgpack.RawMessage // its top-level fields; nil when T is not encoded as a map
}

func newCodec[T any](defaults T) (*codec[T], error) {
	b, err := msgpack.Marshal(&defaults)
	if err != nil {
		return nil, fmt.Errorf("%w: Defaults cannot be encoded: %v", ErrInvalidConfig, err)
	}
	c := &codec[T]{defaults: b}
	var m map[string]msgpack.RawMessage
	if msgpack.Unmarshal(b, &m) == nil && m != nil {
		c.defaultsMap = m
	}
	return c, nil
}

// encode returns the msgpack of v.
func (c *codec[T]) encode(v *T) ([]byte, error) {
	return msgpack.Marshal(v)
}

// fresh returns a deep copy of the defaults.
func (c *codec[T]) fresh() (T, error) {
	var v T
	err := msgpack.Unmarshal(c.defaults, &v)
	return v, err
}

// decode returns stored data decoded over a copy of the defaults; nil stored
// data gives the defaults.
func (c *codec[T]) decode(stored []byte) (T, error) {
	if stored == nil {
		return c.fresh()
	}
	if c.defaultsMap == nil {
		var v T // not a map: nothing to merge
		return v, msgpack.Unmarshal(stored, &v)
	}
	var fields map[string]msgpack.RawMessage
	if err := msgpack.Unmarshal(stored, &fields); err != nil {
		var z T
		return z, err
	}
	for k, raw := range c.defaultsMap {
		if _, ok := fields[k]; !ok {
			if fields == nil {
				fields = make(map[string]msgpack.RawMessage, len(c.defaultsMap))
			}
			fields[k] = raw
		}
	}
	merged, err := msgpack.Marshal(fields)
	if err != nil {
		var z T
		return z, err
	}
	var v T
	return v, msgpack.Unmarshal(merged, &v)
}

// decodeExact decodes b into a zero T, without the defaults: for data this
// build encoded itself (a trade's copies and images).
func (c *codec[T]) decodeExact(b []byte) (T, error) {
	var v T
	return v, msgpack.Unmarshal(b, &v)
}
