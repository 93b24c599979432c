package datacodec

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
)

// clone deep-copies src into dst (a zero value of the same type),
// following the plan: a pure value is one assignment, a struct is copied
// field by field (only the fields the codec encodes), strings are shared
// (they are immutable), and maps, slices and pointers get new memory. A
// type with its own msgpack encoding that holds references is copied by
// an msgpack round trip, which is what an encode and decode would do.
func (s *state) clone(p *plan, dst, src reflect.Value) error {
	if p.pure {
		dst.Set(src)
		return nil
	}
	if s.depth++; s.depth > maxDepth {
		return ErrNotATree
	}
	err := s.cloneDeep(p, dst, src)
	s.depth--
	return err
}

func (s *state) cloneDeep(p *plan, dst, src reflect.Value) error {
	switch p.kind {
	case kStruct:
		return s.cloneSteps(p.steps, dst, src)
	case kBytes:
		if src.IsNil() {
			dst.SetZero()
			return nil
		}
		b := make([]byte, src.Len())
		copy(b, src.Bytes())
		dst.SetBytes(b)
	case kMap:
		return s.cloneMap(p, dst, src)
	case kSlice:
		if src.IsNil() {
			dst.SetZero()
			return nil
		}
		n := src.Len()
		sl := reflect.MakeSlice(p.typ, n, n)
		if p.elem.pure {
			reflect.Copy(sl, src)
		} else {
			for i := range n {
				if err := s.clone(p.elem, sl.Index(i), src.Index(i)); err != nil {
					return err
				}
			}
		}
		dst.Set(sl)
	case kArray:
		for i := range src.Len() {
			if err := s.clone(p.elem, dst.Index(i), src.Index(i)); err != nil {
				return err
			}
		}
	case kPtr:
		if src.IsNil() {
			dst.SetZero()
			return nil
		}
		nv := reflect.New(p.elem.typ)
		err := s.clone(p.elem, nv.Elem(), src.Elem())
		dst.Set(nv)
		return err
	case kIface:
		if src.IsNil() {
			dst.SetZero()
			return nil
		}
		e := src.Elem()
		ep, err := s.c.planFor(e.Type())
		if err != nil {
			return err
		}
		if ep.pure { // the boxed value cannot be changed through the interface
			dst.Set(src)
			return nil
		}
		nv := reflect.New(e.Type()).Elem()
		if err := s.clone(ep, nv, e); err != nil {
			return err
		}
		dst.Set(nv)
	case kCustom:
		return cloneCustom(dst, src, s.c.tag)
	}
	return nil
}

func (s *state) cloneSteps(steps []cloneStep, dst, src reflect.Value) error {
	for _, st := range steps {
		sf, df := src.Field(st.index), dst.Field(st.index)
		switch {
		case st.plan != nil:
			if err := s.clone(st.plan, df, sf); err != nil {
				return err
			}
		case !st.ptr:
			if err := s.cloneSteps(st.sub, df, sf); err != nil {
				return err
			}
		case !sf.IsNil() && df.CanSet():
			nv := reflect.New(st.typ)
			if err := s.cloneSteps(st.sub, nv.Elem(), sf.Elem()); err != nil {
				return err
			}
			df.Set(nv)
		}
	}
	return nil
}

func (s *state) cloneMap(p *plan, dst, src reflect.Value) error {
	if src.IsNil() {
		dst.SetZero()
		return nil
	}
	if p.copyMap != nil {
		dst.Set(p.copyMap(src))
		return nil
	}
	m := reflect.MakeMapWithSize(p.typ, src.Len())
	kt, vt := s.temp(p.key), s.temp(p.elem)
	defer s.put(p.key, kt)
	defer s.put(p.elem, vt)
	var nv reflect.Value
	if !p.elem.pure {
		nv = s.temp(p.elem)
		defer s.put(p.elem, nv)
	}
	var it reflect.MapIter
	it.Reset(src)
	for it.Next() {
		kt.SetIterKey(&it)
		vt.SetIterValue(&it)
		if p.elem.pure {
			m.SetMapIndex(kt, vt)
			continue
		}
		nv.SetZero()
		if err := s.clone(p.elem, nv, vt); err != nil {
			return err
		}
		m.SetMapIndex(kt, nv)
	}
	dst.Set(m)
	return nil
}

// cloneCustom copies a value of a type with its own encoding by encoding
// and decoding it with msgpack.
func cloneCustom(dst, src reflect.Value, tag string) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	var w bytes.Buffer
	enc.Reset(&w)
	enc.SetCustomStructTag(tag)
	if err := enc.EncodeValue(src); err != nil {
		return fmt.Errorf("datacodec: clone %s: %w", src.Type(), err)
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(&w)
	dec.SetCustomStructTag(tag)
	nv := reflect.New(src.Type())
	if err := dec.DecodeValue(nv.Elem()); err != nil {
		return fmt.Errorf("datacodec: clone %s: %w", src.Type(), err)
	}
	dst.Set(nv.Elem())
	return nil
}
