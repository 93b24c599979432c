package datacodec

import (
	"math"
	"reflect"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Encoding appends straight to a byte slice, following the plans: struct
// fields in declaration order (as msgpack writes them), then the unknown
// fields kept for that struct, already encoded; map entries sorted
// canonically. A map is written in Go's iteration order and its entries
// then moved into order, so no key or value is ever boxed.

// span is one map entry written to state.buf: key at [start, keyEnd), value
// up to end.
type span struct{ start, keyEnd, end int }

// Write and WriteByte let a msgpack.Encoder write custom values into buf.
func (s *state) Write(p []byte) (int, error) { s.buf = append(s.buf, p...); return len(p), nil }

func (s *state) WriteByte(c byte) error { s.buf = append(s.buf, c); return nil }

// temp returns a settable scratch value of p's type; put gives it back.
func (s *state) temp(p *plan) reflect.Value {
	if p.id < len(s.temps) {
		if l := s.temps[p.id]; len(l) > 0 {
			v := l[len(l)-1]
			s.temps[p.id] = l[:len(l)-1]
			return v
		}
	}
	return reflect.New(p.typ).Elem()
}

func (s *state) put(p *plan, v reflect.Value) {
	v.SetZero() // drop references into the caller's data
	for len(s.temps) <= p.id {
		s.temps = append(s.temps, nil)
	}
	s.temps[p.id] = append(s.temps[p.id], v)
}

func (s *state) encode(p *plan, v reflect.Value, un *node) error {
	b := s.buf
	switch p.kind {
	case kBool:
		s.buf = appendBool(b, v.Bool())
	case kInt:
		s.buf = appendInt(b, v.Int())
	case kInt8, kInt16, kInt32, kInt64:
		if s.loose > 0 {
			s.buf = appendInt(b, v.Int())
			break
		}
		s.buf = appendSized(b, p.kind, v)
	case kUint8, kUint16, kUint32, kUint64:
		if s.loose > 0 {
			s.buf = appendUint(b, v.Uint())
			break
		}
		s.buf = appendSized(b, p.kind, v)
	case kUint:
		s.buf = appendUint(b, v.Uint())
	case kFloat32:
		s.buf = append4(b, msgpcode.Float, math.Float32bits(float32(v.Float())))
	case kFloat64:
		s.buf = append8(b, msgpcode.Double, math.Float64bits(v.Float()))
	case kString:
		s.buf = appendString(b, v.String())
	case kBytes:
		if v.IsNil() {
			s.buf = appendNil(b)
			break
		}
		s.buf = append(appendBinLen(b, v.Len()), v.Bytes()...)
	case kByteArray:
		s.buf = appendBinLen(b, v.Len())
		for i := 0; i < v.Len(); i++ {
			s.buf = append(s.buf, byte(v.Index(i).Uint()))
		}
	case kCustom:
		return s.encodeCustom(v)
	case kTime:
		s.buf = appendTime(b, v)
	default:
		if s.depth++; s.depth > maxDepth {
			return ErrNotATree
		}
		err := s.encodeContainer(p, v, un)
		s.depth--
		return err
	}
	return nil
}

func (s *state) encodeContainer(p *plan, v reflect.Value, un *node) error {
	switch p.kind {
	case kStruct:
		return s.encodeStruct(p, v, un)
	case kMap:
		return s.encodeMap(p, v, un)
	case kArray:
		return s.encodeArray(p, v, un)
	}
	if v.IsNil() { // kSlice, kPtr, kIface
		s.buf = appendNil(s.buf)
		return nil
	}
	switch p.kind {
	case kSlice:
		return s.encodeArray(p, v, un)
	case kPtr:
		return s.encode(p.elem, v.Elem(), un)
	}
	// Inside an interface the dynamic type does not survive a decode
	// (msgpack reads a map, small ints as int8), so integers take their
	// smallest form and struct fields are sorted: what a decode gives back
	// then encodes to the same bytes.
	e := v.Elem()
	ep, err := s.c.planFor(e.Type())
	if err != nil {
		return err
	}
	s.loose++
	err = s.encode(ep, e, nil)
	s.loose--
	return err
}

// appendTime writes a time.Time as msgpack's EncodeTime does: extension
// -1 of 4, 8 or 12 bytes (seconds and nanoseconds, whatever the location).
func appendTime(b []byte, v reflect.Value) []byte {
	var tm time.Time
	if v.CanAddr() {
		tm = *v.Addr().Interface().(*time.Time) // no copy to the heap
	} else {
		tm = v.Interface().(time.Time)
	}
	secs, ns := uint64(tm.Unix()), uint64(tm.Nanosecond())
	if data := ns<<34 | secs; secs>>34 == 0 && data>>32 == 0 {
		return append4(append(b, msgpcode.FixExt4), 0xff, uint32(data))
	} else if secs>>34 == 0 {
		return append8(append(b, msgpcode.FixExt8), 0xff, data)
	}
	b = append4(append(b, msgpcode.Ext8, 12), 0xff, uint32(ns))
	return append(b, byte(secs>>56), byte(secs>>48), byte(secs>>40), byte(secs>>32),
		byte(secs>>24), byte(secs>>16), byte(secs>>8), byte(secs))
}

// appendSized writes a sized integer in its fixed width, as msgpack does.
func appendSized(b []byte, k kind, v reflect.Value) []byte {
	switch k {
	case kInt8:
		return append1(b, msgpcode.Int8, uint8(v.Int()))
	case kInt16:
		return append2(b, msgpcode.Int16, uint16(v.Int()))
	case kInt32:
		return append4(b, msgpcode.Int32, uint32(v.Int()))
	case kInt64:
		return append8(b, msgpcode.Int64, uint64(v.Int()))
	case kUint8:
		return append1(b, msgpcode.Uint8, uint8(v.Uint()))
	case kUint16:
		return append2(b, msgpcode.Uint16, uint16(v.Uint()))
	case kUint32:
		return append4(b, msgpcode.Uint32, uint32(v.Uint()))
	}
	return append8(b, msgpcode.Uint64, v.Uint())
}

func (s *state) encodeCustom(v reflect.Value) error {
	if s.me == nil {
		s.me = msgpack.NewEncoder(s)
		s.me.SetSortMapKeys(true)
		s.me.SetCustomStructTag(s.c.tag)
	}
	return s.me.EncodeValue(v)
}

// fieldOf is the field at index below v; ok is false when the path
// crosses a nil embedded pointer.
func fieldOf(v reflect.Value, index []int) (reflect.Value, bool) {
	if len(index) == 1 {
		return v.Field(index[0]), true
	}
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func (s *state) encodeStruct(p *plan, v reflect.Value, un *node) error {
	fields := p.fields[:p.nEnc]
	var kids []*node
	var raw []rawEntry
	if un != nil {
		kids, raw = un.kids, un.raw
	}
	n := len(fields)
	if p.omitEmpty {
		n = 0
		for i := range fields {
			if !s.omit(p, i, v, kids) {
				n++
			}
		}
	}
	s.buf = appendMapLen(s.buf, n+len(raw))
	base, region := len(s.spans), len(s.buf)
	for i := range fields {
		if p.omitEmpty && s.omit(p, i, v, kids) {
			continue
		}
		f := &fields[i]
		start := len(s.buf)
		s.buf = append(s.buf, f.nameEnc...)
		fv, ok := fieldOf(v, f.index)
		if !ok {
			s.buf = appendNil(s.buf)
		} else {
			var kid *node
			if kids != nil {
				kid = kids[i]
			}
			if err := s.encode(f.plan, fv, kid); err != nil {
				return err
			}
		}
		if s.loose > 0 {
			s.spans = append(s.spans, span{start, start + len(f.nameEnc), len(s.buf)})
		}
	}
	if s.loose > 0 {
		s.tmp = sortSpans(s.buf, s.spans[base:], region, s.tmp)
		s.spans = s.spans[:base]
	}
	for _, r := range raw {
		s.buf = append(s.buf, r.kv...)
	}
	return nil
}

// omit is msgpack's omitempty rule, except that a struct holding unknown
// fields is always written.
func (s *state) omit(p *plan, i int, v reflect.Value, kids []*node) bool {
	f := &p.fields[i]
	fv, ok := fieldOf(v, f.index)
	if !ok {
		return true
	}
	if !f.omitEmpty {
		return false
	}
	if kids != nil && kids[i] != nil && (f.plan.kind == kStruct || f.plan.kind == kArray) {
		return false // an empty struct may still carry unknown fields to write
	}
	return s.isEmpty(f.plan, fv)
}

// isEmpty mirrors msgpack's isEmptyValue.
func (s *state) isEmpty(p *plan, v reflect.Value) bool {
	for p.kind == kIface {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
		var err error
		if p, err = s.c.planFor(v.Type()); err != nil {
			return false
		}
	}
	if p.zeroer {
		k := v.Kind()
		if (k == reflect.Pointer || k == reflect.Map || k == reflect.Slice || k == reflect.Interface) && v.IsNil() {
			return true
		}
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Struct:
		if p.kind != kStruct {
			return false // a struct with its own encoding: counted as not empty
		}
		if !p.omitEmpty {
			return p.nEnc == 0
		}
		for i := 0; i < p.nEnc; i++ {
			if !s.omit(p, i, v, nil) {
				return false
			}
		}
		return true
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

func (s *state) encodeMap(p *plan, v reflect.Value, un *node) error {
	if v.IsNil() {
		s.buf = appendNil(s.buf)
		return nil
	}
	n := v.Len()
	s.buf = appendMapLen(s.buf, n)
	if n == 0 {
		return nil
	}
	var keyed map[string]*node
	if un != nil {
		keyed = un.keyed
	}
	kt, vt := s.temp(p.key), s.temp(p.elem)
	defer s.put(p.key, kt)
	defer s.put(p.elem, vt)
	base, region := len(s.spans), len(s.buf)
	var it reflect.MapIter
	it.Reset(v)
	for it.Next() {
		kt.SetIterKey(&it)
		vt.SetIterValue(&it)
		start := len(s.buf)
		if err := s.encode(p.key, kt, nil); err != nil {
			return err
		}
		keyEnd := len(s.buf)
		var kid *node
		if keyed != nil {
			kid = keyed[string(s.buf[start:keyEnd])]
		}
		if err := s.encode(p.elem, vt, kid); err != nil {
			return err
		}
		s.spans = append(s.spans, span{start, keyEnd, len(s.buf)})
	}
	s.tmp = sortSpans(s.buf, s.spans[base:], region, s.tmp)
	s.spans = s.spans[:base]
	return nil
}

func (s *state) encodeArray(p *plan, v reflect.Value, un *node) error {
	n := v.Len()
	s.buf = appendArrayLen(s.buf, n)
	switch {
	case p.elem.kind == kString:
		for i := 0; i < n; i++ {
			s.buf = appendString(s.buf, v.Index(i).String())
		}
	case un == nil:
		for i := 0; i < n; i++ {
			if err := s.encode(p.elem, v.Index(i), nil); err != nil {
				return err
			}
		}
	case p.kind == kArray:
		for i := 0; i < n; i++ {
			var kid *node
			if i < len(un.kids) {
				kid = un.kids[i]
			}
			if err := s.encode(p.elem, v.Index(i), kid); err != nil {
				return err
			}
		}
	default:
		return s.encodeMatched(p, v, un)
	}
	return nil
}

// encodeMatched writes a slice's elements, giving each element back the
// unknown fields of the stored element whose known fields it still equals
// (see the package doc: slices are matched by content, not by index).
func (s *state) encodeMatched(p *plan, v reflect.Value, un *node) error {
	used := make([]bool, len(un.elems))
	for i := 0; i < v.Len(); i++ {
		ev := v.Index(i)
		start := len(s.buf)
		if err := s.encode(p.elem, ev, nil); err != nil {
			return err
		}
		for j, en := range un.elems {
			if !used[j] && en.known == string(s.buf[start:]) {
				used[j] = true
				s.buf = s.buf[:start]
				if err := s.encode(p.elem, ev, en.n); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}
