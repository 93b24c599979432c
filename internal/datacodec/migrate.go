package datacodec

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Migrations work on the stored data as plain Go values (see Migration);
// the result is encoded again and then decoded into T like any record.

// migrate runs migrations from..len-1 over stored and returns the result,
// encoded.
func (c *core) migrate(s *state, stored []byte, from int, ms []Migration) ([]byte, error) {
	r := msgpackwire.Reader{B: stored}
	v, err := loose(&r, 0)
	if err == nil && r.Off != len(stored) {
		err = fmt.Errorf("%w: %d bytes after the value", ErrMalformed, len(stored)-r.Off)
	}
	if err != nil {
		return nil, fieldError(err)
	}
	m, ok := v.(map[string]any)
	switch {
	case v == nil:
		m = map[string]any{}
	case !ok:
		return nil, &FieldError{Err: fmt.Errorf("%w: migrations need a map with string keys at the top, the record holds %s",
			ErrTypeMismatch, msgpackwire.Describe(stored[0]))}
	}
	for i := from; i < len(ms); i++ {
		if err := runMigration(i, ms[i].Apply, m); err != nil {
			return nil, err
		}
	}
	s.buf = s.buf[:0]
	if err := s.encodeLoose(m); err != nil {
		return nil, &MigrationError{Index: len(ms) - 1, Err: fmt.Errorf("encoding the result: %w", err)}
	}
	return bytes.Clone(s.buf), nil
}

func runMigration(i int, apply func(map[string]any) error, m map[string]any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &MigrationError{Index: i, Err: &PanicError{Value: r, Stack: debug.Stack()}}
		}
	}()
	if err := apply(m); err != nil {
		return &MigrationError{Index: i, Err: err}
	}
	return nil
}

// loose reads the value at r as a migration sees it: nil, bool, int64
// (uint64 above math.MaxInt64), float64, string, []byte, []any,
// map[string]any (map[any]any when a key is not a string), time.Time, and
// msgpack.RawMessage for any other extension.
func loose(r *msgpackwire.Reader, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	start := r.Off
	c, err := r.Code()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, nil
	case c == msgpcode.False || c == msgpcode.True:
		return c == msgpcode.True, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		return r.Float(c, "")
	case msgpackwire.IsStr(c):
		p, _, err := r.Str(c, "")
		return string(p), err
	case msgpackwire.IsBin(c):
		p, _, err := r.Str(c, "")
		return bytes.Clone(p), err
	case msgpackwire.IsArray(c):
		n, err := r.ArrayLen(c)
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = loose(r, depth+1); err != nil {
				return nil, atPath(err, fmt.Sprintf("[%d]", i))
			}
		}
		return a, nil
	case msgpackwire.IsMap(c):
		return looseMap(r, c, depth)
	case msgpackwire.IsExt(c):
		r.Off = start
		if _, err := r.Skip(); err != nil {
			return nil, err
		}
		raw := bytes.Clone(r.B[start:r.Off])
		if extType(raw) == -1 {
			var t time.Time
			if err := msgpack.Unmarshal(raw, &t); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			return t, nil
		}
		return msgpack.RawMessage(raw), nil
	}
	u, neg, err := r.Integer(c, "a value")
	switch {
	case err != nil:
		return nil, err
	case neg || u <= math.MaxInt64:
		return int64(u), nil
	}
	return u, nil
}

func looseMap(r *msgpackwire.Reader, c byte, depth int) (any, error) {
	n, err := r.MapLen(c)
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, min(n, 4096))
	var mk map[any]any // once a key is not a string
	for i := range n {
		k, err := loose(r, depth+1)
		if err != nil {
			return nil, atPath(err, fmt.Sprintf("{key %d}", i))
		}
		ks, ok := k.(string)
		if !ok {
			switch k.(type) {
			case []byte, []any, map[string]any, map[any]any, msgpack.RawMessage:
				return nil, atPath(fmt.Errorf("%w: a map key of type %T cannot be migrated", ErrTypeMismatch, k), fmt.Sprintf("{key %d}", i))
			}
		}
		if !ok && mk == nil {
			mk = make(map[any]any, n)
			for a, b := range m {
				mk[a] = b
			}
		}
		v, err := loose(r, depth+1)
		if err != nil {
			return nil, atPath(err, fmt.Sprintf("[%v]", k))
		}
		if mk != nil {
			mk[k] = v
		} else {
			m[ks] = v
		}
	}
	if mk != nil {
		return mk, nil
	}
	return m, nil
}

// extType is the type byte of an encoded extension.
func extType(raw []byte) int8 {
	at := 1
	switch raw[0] {
	case msgpcode.Ext8:
		at = 2
	case msgpcode.Ext16:
		at = 3
	case msgpcode.Ext32:
		at = 5
	}
	if at >= len(raw) {
		return 0
	}
	return int8(raw[at])
}

// encodeLoose writes what a migration left (the values loose reads, or any
// other Go value a migration put in), maps sorted.
func (s *state) encodeLoose(v any) error {
	if s.depth++; s.depth > maxDepth {
		return ErrNotATree
	}
	defer func() { s.depth-- }()
	switch v := v.(type) {
	case nil:
		s.buf = appendNil(s.buf)
	case bool:
		s.buf = appendBool(s.buf, v)
	case int64:
		s.buf = appendInt(s.buf, v)
	case uint64:
		s.buf = appendUint(s.buf, v)
	case float64:
		s.buf = append8(s.buf, msgpcode.Double, math.Float64bits(v))
	case string:
		s.buf = appendString(s.buf, v)
	case msgpack.RawMessage:
		if len(v) == 0 {
			s.buf = appendNil(s.buf)
			break
		}
		s.buf = append(s.buf, v...)
	case []any:
		if v == nil {
			s.buf = appendNil(s.buf)
			break
		}
		s.buf = appendArrayLen(s.buf, len(v))
		for _, e := range v {
			if err := s.encodeLoose(e); err != nil {
				return err
			}
		}
	case map[string]any:
		if v == nil {
			s.buf = appendNil(s.buf)
			break
		}
		return encodeLooseMap(s, v)
	case map[any]any:
		if v == nil {
			s.buf = appendNil(s.buf)
			break
		}
		return encodeLooseMap(s, v)
	default:
		p, err := s.c.planFor(reflect.TypeOf(v))
		if err != nil {
			return err
		}
		return s.encode(p, reflect.ValueOf(v), nil)
	}
	return nil
}

func encodeLooseMap[K comparable](s *state, m map[K]any) error {
	s.buf = appendMapLen(s.buf, len(m))
	base, region := len(s.spans), len(s.buf)
	for k, v := range m {
		start := len(s.buf)
		if err := s.encodeLoose(k); err != nil {
			return err
		}
		keyEnd := len(s.buf)
		if err := s.encodeLoose(v); err != nil {
			return err
		}
		s.spans = append(s.spans, span{start, keyEnd, len(s.buf)})
	}
	s.tmp = sortSpans(s.buf, s.spans[base:], region, s.tmp)
	s.spans = s.spans[:base]
	return nil
}
