package datacodec

import (
	"bytes"
	"reflect"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// decodeStruct reads a struct's map over dst: each name the plan knows
// into its field (over its default in tmpl), each other entry kept raw in
// the node it returns; the fields the record lacks take their defaults.
func (s *state) decodeStruct(p *plan, c byte, dst, tmpl reflect.Value) (*node, error) {
	if c == msgpcode.Nil { // as if absent
		if tmpl.IsValid() {
			return nil, s.clone(p, dst, tmpl)
		}
		dst.SetZero()
		return nil, nil
	}
	n, err := s.r.MapLen(c)
	if err != nil {
		return nil, err
	}
	var seenBuf [2]uint64
	seen := seenBuf[:]
	if len(p.fields) > 128 {
		seen = make([]uint64, (len(p.fields)+63)/64)
	}
	var un *node
	for range n {
		kstart := s.r.Off
		idx := -1
		kc, err := s.r.Code()
		if err != nil {
			return nil, err
		}
		if msgpackwire.IsStr(kc) {
			name, _, err := s.r.Str(kc, "")
			if err != nil {
				return nil, err
			}
			if j, ok := p.byName[string(name)]; ok {
				idx = j
			}
		} else {
			s.r.Off = kstart
			if _, err := s.r.Skip(); err != nil {
				return nil, err
			}
		}
		if idx < 0 {
			if un, err = s.keepUnknown(un, kstart); err != nil {
				return nil, err
			}
			continue
		}
		f := &p.fields[idx]
		markSeen(seen, idx, f.covers)
		fv, ok := s.fieldAlloc(dst, f.index)
		if !ok {
			if _, err := s.r.Skip(); err != nil {
				return nil, err
			}
			continue
		}
		var ft reflect.Value
		if tmpl.IsValid() {
			ft, _ = fieldOf(tmpl, f.index)
		}
		kid, err := s.decode(f.plan, fv, ft)
		if err != nil {
			return nil, atPath(err, "."+f.name)
		}
		if kid != nil && idx < p.nEnc {
			un = keepKid(un, p.nEnc, idx, kid)
		}
	}
	if tmpl.IsValid() {
		if err := s.fillUnseen(p, dst, tmpl, seen); err != nil {
			return nil, err
		}
	}
	if un != nil {
		un.sortRaw()
	}
	return un, nil
}

// keepUnknown keeps the entry whose key starts at kstart, one of a name p
// does not know, in un (made when nil), and returns un.
func (s *state) keepUnknown(un *node, kstart int) (*node, error) {
	if un == nil {
		un = &node{}
	}
	if err := s.keepRaw(un, kstart); err != nil {
		if name, ok := keyString(s.r.B[kstart:]); ok {
			return nil, atPath(err, "."+name)
		}
		return nil, err
	}
	return un, nil
}

// keepKid keeps in un (made when nil) what encoded field idx of nEnc held
// that its type does not know, and returns un.
func keepKid(un *node, nEnc, idx int, kid *node) *node {
	if un == nil {
		un = &node{}
	}
	if un.kids == nil {
		un.kids = make([]*node, nEnc)
	}
	un.kids[idx] = kid
	return un
}

// markSeen marks field idx, and the fields it covers, as read.
func markSeen(seen []uint64, idx int, covers []int) {
	seen[idx/64] |= 1 << (idx % 64)
	for _, j := range covers {
		seen[j/64] |= 1 << (j % 64)
	}
}

// fillUnseen sets every field of dst the record did not hold (not marked
// in seen) from the defaults tmpl.
func (s *state) fillUnseen(p *plan, dst, tmpl reflect.Value, seen []uint64) error {
	for i := range p.nEnc {
		if seen[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		f := &p.fields[i]
		ft, ok := fieldOf(tmpl, f.index)
		if !ok {
			continue
		}
		fv, ok := fieldOf(dst, f.index)
		if !ok {
			if fv, ok = s.allocPath(dst, f.index); !ok {
				continue
			}
		}
		if err := s.clone(f.plan, fv, ft); err != nil {
			return atPath(err, "."+f.name)
		}
	}
	return nil
}

// fieldAlloc is the field at index below v, allocating the embedded
// pointers on the way, except for a stored nil (there is nothing to put
// there). ok is false when the value is to be skipped.
func (s *state) fieldAlloc(v reflect.Value, index []int) (reflect.Value, bool) {
	if fv, ok := fieldOf(v, index); ok {
		return fv, true
	}
	if c, err := s.r.Peek(); err != nil || c == msgpcode.Nil {
		return reflect.Value{}, false
	}
	return s.allocPath(v, index)
}

func (s *state) allocPath(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, false // an unexported embedded pointer
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// keepRaw keeps the struct entry (key and value) at kstart, which the
// plan does not know, in canonical form.
func (s *state) keepRaw(un *node, kstart int) error {
	s.r.Off = kstart
	if _, err := s.r.Skip(); err != nil {
		return err
	}
	klen := s.r.Off - kstart
	hasMaps, err := s.r.Skip()
	if err != nil {
		return err
	}
	kv := s.r.B[kstart:s.r.Off]
	if hasMaps {
		kr := msgpackwire.Reader{B: kv}
		out, err := canonical(nil, &kr, 0) // the key
		if err == nil {
			out, err = canonical(out, &kr, 0) // the value
		}
		if err != nil {
			return err
		}
		kv = out[:len(out):len(out)]
	} else {
		kv = bytes.Clone(kv)
	}
	un.raw = append(un.raw, rawEntry{kv: kv, klen: klen})
	return nil
}
