package datacodec

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoding reads s.r into a zero value, following the plan, with the
// default value for the same place (tmpl, invalid where there is none):
//
//   - a struct field the record lacks takes a deep copy of its default;
//   - a stored map or slice replaces the default whole, but a stored nil
//     where the default is non-nil becomes empty;
//   - a map entry is decoded over the default map's entry of the same key,
//     if there is one; slice elements have no default;
//   - everything else stored wins.
//
// What the plan does not know is kept, as canonical msgpack bytes, in a
// node tree that mirrors the value (see unknown.go).

// maxDepth bounds nesting, so that a corrupt record (or a pointer cycle on
// the way out) fails instead of exhausting the stack.
const maxDepth = 1000

// sliceAllocLimit bounds what a stored length may make Decode allocate
// ahead; longer slices grow as their elements are actually read.
const sliceAllocLimit = 1 << 20

func (s *state) decode(p *plan, dst, tmpl reflect.Value) (*node, error) {
	c, err := s.r.Code()
	if err != nil {
		return nil, err
	}
	switch p.kind {
	case kBool:
		switch c {
		case msgpcode.Nil, msgpcode.False:
			dst.SetBool(false)
		case msgpcode.True:
			dst.SetBool(true)
		default:
			return nil, mismatch(c, "bool")
		}
	case kInt, kInt8, kInt16, kInt32, kInt64:
		u, neg, err := s.r.Integer(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		n := int64(u)
		if !neg && u > math.MaxInt64 || p.bits < 64 && (n < -1<<(p.bits-1) || n > 1<<(p.bits-1)-1) {
			return nil, overflow(u, neg, p)
		}
		dst.SetInt(n)
	case kUint, kUint8, kUint16, kUint32, kUint64:
		u, neg, err := s.r.Integer(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		if neg || p.bits < 64 && u >= 1<<p.bits {
			return nil, overflow(u, neg, p)
		}
		dst.SetUint(u)
	case kFloat32, kFloat64:
		f, err := s.r.Float(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		dst.SetFloat(f)
	case kString:
		b, _, err := s.r.Str(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		dst.SetString(string(b))
	case kBytes:
		b, isNil, err := s.r.Str(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		if isNil {
			setEmpty(dst, tmpl)
			break
		}
		dst.SetBytes(bytes.Clone(b))
	case kByteArray:
		b, _, err := s.r.Str(c, p.typ.String())
		if err != nil {
			return nil, err
		}
		if len(b) > dst.Len() {
			return nil, fmt.Errorf("%w: %d bytes into %s", ErrTypeMismatch, len(b), p.typ)
		}
		for i, x := range b {
			dst.Index(i).SetUint(uint64(x))
		}
	case kIface, kCustom, kTime:
		s.r.Off--
		return nil, s.delegate(dst)
	default:
		if s.depth++; s.depth > maxDepth {
			return nil, errTooDeep
		}
		un, err := s.decodeContainer(p, c, dst, tmpl)
		s.depth--
		return un, err
	}
	return nil, nil
}

func overflow(u uint64, neg bool, p *plan) error {
	if neg {
		return fmt.Errorf("%w: %d overflows %s", ErrTypeMismatch, int64(u), p.typ)
	}
	return fmt.Errorf("%w: %d overflows %s", ErrTypeMismatch, u, p.typ)
}

func (s *state) decodeContainer(p *plan, c byte, dst, tmpl reflect.Value) (*node, error) {
	switch p.kind {
	case kStruct:
		return s.decodeStruct(p, c, dst, tmpl)
	case kMap:
		return s.decodeMap(p, c, dst, tmpl)
	case kSlice:
		return s.decodeSlice(p, c, dst, tmpl)
	case kArray:
		return s.decodeArray(p, c, dst, tmpl)
	}
	// kPtr: a stored nil is nil; anything else is decoded over the
	// default's pointee.
	if c == msgpcode.Nil {
		dst.SetZero()
		return nil, nil
	}
	s.r.Off--
	nv := reflect.New(p.elem.typ)
	var et reflect.Value
	if tmpl.IsValid() && !tmpl.IsNil() {
		et = tmpl.Elem()
	}
	un, err := s.decode(p.elem, nv.Elem(), et)
	dst.Set(nv)
	return un, err
}

// setEmpty is a stored nil map or slice: empty where the default is not nil.
func setEmpty(dst, tmpl reflect.Value) {
	switch {
	case !tmpl.IsValid() || tmpl.IsNil():
		dst.SetZero()
	case dst.Kind() == reflect.Map:
		dst.Set(reflect.MakeMap(dst.Type()))
	default:
		dst.Set(reflect.MakeSlice(dst.Type(), 0, 0))
	}
}

func (s *state) decodeMap(p *plan, c byte, dst, tmpl reflect.Value) (*node, error) {
	n, err := s.r.MapLen(c)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		setEmpty(dst, tmpl)
		return nil, nil
	}
	m := reflect.MakeMapWithSize(p.typ, min(n, 4096))
	kt, vt := s.temp(p.key), s.temp(p.elem)
	defer s.put(p.key, kt)
	defer s.put(p.elem, vt)
	useTmpl := p.elem.templ && tmpl.IsValid() && tmpl.Len() > 0
	var un *node
	for i := range n {
		kt.SetZero()
		if _, err := s.decode(p.key, kt, reflect.Value{}); err != nil {
			return nil, atPath(err, fmt.Sprintf("{key %d}", i))
		}
		if p.keyIface && !kt.Comparable() {
			return nil, atPath(fmt.Errorf("%w: a map key of type %s", ErrTypeMismatch, kt.Elem().Type()), fmt.Sprintf("{key %d}", i))
		}
		vt.SetZero()
		var et reflect.Value
		if useTmpl {
			et = tmpl.MapIndex(kt)
		}
		kid, err := s.decode(p.elem, vt, et)
		if err != nil {
			return nil, atPath(err, keySegment(kt))
		}
		m.SetMapIndex(kt, vt)
		if kid != nil {
			start := len(s.buf)
			if err := s.encode(p.key, kt, nil); err != nil {
				return nil, atPath(err, keySegment(kt))
			}
			if un == nil {
				un = &node{keyed: map[string]*node{}}
			}
			un.keyed[string(s.buf[start:])] = kid
			s.buf = s.buf[:start]
		}
	}
	dst.Set(m)
	return un, nil
}

func keySegment(k reflect.Value) string {
	switch k.Kind() {
	case reflect.String:
		return "[" + strconv.Quote(k.String()) + "]"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "[" + strconv.FormatInt(k.Int(), 10) + "]"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "[" + strconv.FormatUint(k.Uint(), 10) + "]"
	}
	return fmt.Sprintf("[%v]", k)
}

func (s *state) decodeSlice(p *plan, c byte, dst, tmpl reflect.Value) (*node, error) {
	n, err := s.r.ArrayLen(c)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		setEmpty(dst, tmpl)
		return nil, nil
	}
	size := max(int(p.elem.typ.Size()), 1)
	dst.Set(reflect.MakeSlice(p.typ, 0, min(n, sliceAllocLimit/size)))
	var un *node
	for i := range n {
		if i == dst.Cap() {
			dst.Grow(1)
		}
		dst.SetLen(i + 1)
		ev := dst.Index(i)
		kid, err := s.decode(p.elem, ev, reflect.Value{})
		if err != nil {
			return nil, atPath(err, "["+strconv.Itoa(i)+"]")
		}
		if kid != nil {
			start := len(s.buf)
			if err := s.encode(p.elem, ev, nil); err != nil {
				return nil, atPath(err, "["+strconv.Itoa(i)+"]")
			}
			if un == nil {
				un = &node{}
			}
			un.elems = append(un.elems, elemNode{index: i, known: string(s.buf[start:]), n: kid})
			s.buf = s.buf[:start]
		}
	}
	return un, nil
}

func (s *state) decodeArray(p *plan, c byte, dst, tmpl reflect.Value) (*node, error) {
	n, err := s.r.ArrayLen(c)
	if err != nil {
		return nil, err
	}
	if n > dst.Len() {
		return nil, fmt.Errorf("%w: %d elements into %s", ErrTypeMismatch, n, p.typ)
	}
	var un *node
	for i := range dst.Len() {
		var et reflect.Value
		if tmpl.IsValid() {
			et = tmpl.Index(i)
		}
		if i >= n { // absent (or the whole array stored as nil)
			if et.IsValid() {
				if err := s.clone(p.elem, dst.Index(i), et); err != nil {
					return nil, err
				}
			}
			continue
		}
		kid, err := s.decode(p.elem, dst.Index(i), et)
		if err != nil {
			return nil, atPath(err, "["+strconv.Itoa(i)+"]")
		}
		if kid != nil {
			if un == nil {
				un = &node{kids: make([]*node, dst.Len())}
			}
			un.kids[i] = kid
		}
	}
	return un, nil
}

// delegate leaves the value at s.r (an any, or a type with its own
// encoding) to msgpack, on a span already checked to be whole and not
// too deep.
func (s *state) delegate(dst reflect.Value) (err error) {
	start := s.r.Off
	if _, err := s.r.Skip(); err != nil {
		return err
	}
	span := s.r.B[start:s.r.Off]
	if msgpackwire.IsMap(span[0]) || msgpackwire.IsArray(span[0]) {
		if err := checkNesting(span, maxDepth); err != nil {
			return err
		}
	}
	if s.md == nil {
		s.md = msgpack.NewDecoder(&s.br)
		s.md.SetCustomStructTag(s.c.tag)
	}
	s.br.Reset(span)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: msgpack panicked decoding %s: %v", ErrTypeMismatch, dst.Type(), r)
		}
	}()
	if err := s.md.DecodeValue(dst); err != nil {
		return fmt.Errorf("%w: %w", ErrTypeMismatch, err)
	}
	return nil
}
