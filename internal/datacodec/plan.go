package datacodec

import (
	"fmt"
	"reflect"
	"time"
)

// A plan is what the codec knows about one Go type, worked out once with
// reflect: how it is written, which names a struct knows (msgpack v5's
// rules), whether a plain assignment copies it deeply, and whether a value
// of it can carry unknown fields.

type kind uint8

const (
	kBool kind = iota
	kInt       // int: the smallest form, like msgpack's EncodeInt
	kInt8      // the fixed-width forms msgpack writes for sized ints
	kInt16
	kInt32
	kInt64
	kUint
	kUint8
	kUint16
	kUint32
	kUint64
	kFloat32
	kFloat64
	kString
	kBytes     // []byte: bin
	kByteArray // [N]byte: bin
	kStruct    // a map of field names
	kMap
	kSlice
	kArray
	kPtr
	kIface  // any: written by dynamic type, read by msgpack
	kCustom // a type with its own msgpack encoding: left to msgpack
	kTime   // time.Time: written here as msgpack does, read by msgpack
)

type plan struct {
	id     int // index of this plan's scratch values in a state
	typ    reflect.Type
	kind   kind
	pure   bool // a plain assignment is a deep copy (no references, nothing skipped)
	track  bool // a value can carry unknown fields (a struct is reachable)
	templ  bool // decoding needs the default value (struct inside, or a map/slice that may be nil)
	zeroer bool // has IsZero() bool, which omitempty consults
	bits   int  // integer width, for overflow checks
	// keyIface: a map whose key type holds an interface, which a stored
	// key may fill with something unhashable.
	keyIface bool
	copyMap  mapCopier // Clone's fast path for some maps of plain types
	elem     *plan
	key      *plan

	// structs
	fields    []field        // the encoded fields first (nEnc), then decode-only names
	nEnc      int            //
	byName    map[string]int // stored name (and alias) -> index in fields
	omitEmpty bool           // some field is omitempty
	steps     []cloneStep    // how Clone copies it
	dropped   []string       // unexported fields msgpack skips (fieldSet.dropped)
}

type field struct {
	name      string
	nameEnc   []byte // the name, msgpack-encoded
	index     []int
	omitEmpty bool
	plan      *plan
	covers    []int // a decode-only embedded struct: the encoded fields it sets
}

// cloneStep copies Go field index of a struct: whole with plan, or (an
// inlined embedded struct that is only partly encoded) by its own steps.
type cloneStep struct {
	index int
	plan  *plan
	sub   []cloneStep
	ptr   bool         // the embedded field is a pointer
	typ   reflect.Type // the embedded struct type
}

// planner builds plans for a type and everything reachable from it. Plans
// already published (have) are reused; new ones land in made and are
// published together once all of them are built.
type planner struct {
	tag    string
	have   func(reflect.Type) (*plan, bool)
	nextID func() int
	made   map[reflect.Type]*plan
	order  []*plan
	active map[reflect.Type]bool // structs whose fields are being collected
}

func (pl *planner) get(t reflect.Type, where string) (*plan, error) {
	if p, ok := pl.have(t); ok {
		return p, nil
	}
	if p, ok := pl.made[t]; ok {
		return p, nil
	}
	p := &plan{id: pl.nextID(), typ: t}
	pl.made[t] = p
	pl.order = append(pl.order, p)
	return p, pl.fill(p, where)
}

func (pl *planner) fill(p *plan, where string) error {
	t := p.typ
	p.zeroer = t.Implements(reflect.TypeFor[interface{ IsZero() bool }]())
	if t == reflect.TypeFor[time.Time]() {
		p.kind = kTime
		return nil
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && isCustom(t, pl.tag) {
		p.kind = kCustom
		return nil
	}
	var err error
	switch t.Kind() {
	case reflect.Bool:
		p.kind = kBool
	case reflect.Int:
		p.kind, p.bits = kInt, 64
	case reflect.Int8:
		p.kind, p.bits = kInt8, 8
	case reflect.Int16:
		p.kind, p.bits = kInt16, 16
	case reflect.Int32:
		p.kind, p.bits = kInt32, 32
	case reflect.Int64:
		p.kind, p.bits = kInt64, 64
	case reflect.Uint:
		p.kind, p.bits = kUint, 64
	case reflect.Uint8:
		p.kind, p.bits = kUint8, 8
	case reflect.Uint16:
		p.kind, p.bits = kUint16, 16
	case reflect.Uint32:
		p.kind, p.bits = kUint32, 32
	case reflect.Uint64:
		p.kind, p.bits = kUint64, 64
	case reflect.Float32:
		p.kind = kFloat32
	case reflect.Float64:
		p.kind = kFloat64
	case reflect.String:
		p.kind = kString
	case reflect.Interface:
		p.kind = kIface
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			p.kind = kBytes
			break
		}
		p.kind = kSlice
		p.elem, err = pl.get(t.Elem(), where+"[]")
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			p.kind = kByteArray
			break
		}
		p.kind = kArray
		p.elem, err = pl.get(t.Elem(), where+"[]")
	case reflect.Map:
		p.kind = kMap
		p.keyIface = hasIface(t.Key(), 0)
		p.copyMap = fastMapCopier(t)
		if p.key, err = pl.get(t.Key(), where+"{key}"); err == nil {
			p.elem, err = pl.get(t.Elem(), where+"[]")
		}
	case reflect.Pointer:
		p.kind = kPtr
		p.elem, err = pl.get(t.Elem(), where)
	case reflect.Struct:
		p.kind = kStruct
		err = pl.fillStruct(p, where)
	default:
		return fmt.Errorf("%w: %s: msgpack cannot encode a %s", ErrInvalidOptions, where, t)
	}
	return err
}

func (pl *planner) fillStruct(p *plan, where string) error {
	t := p.typ
	if asArray(t, pl.tag) {
		p.kind = kCustom // written as an array: no names to keep
		return nil
	}
	fs, err := pl.collect(t, where)
	if err != nil {
		return err
	}
	pos := map[*fieldSpec]int{}
	specs := append([]*fieldSpec(nil), fs.list...)
	for _, s := range fs.list {
		pos[s] = len(pos)
	}
	p.nEnc = len(specs)
	for _, s := range fs.byName {
		if _, ok := pos[s]; !ok {
			pos[s] = len(specs)
			specs = append(specs, s)
		}
	}
	p.fields = make([]field, len(specs))
	for i, s := range specs {
		fp, err := pl.get(s.typ, s.where)
		if err != nil {
			return err
		}
		p.fields[i] = field{name: s.name, nameEnc: appendString(nil, s.name), index: s.index, omitEmpty: s.omitEmpty, plan: fp}
		p.omitEmpty = p.omitEmpty || (i < p.nEnc && s.omitEmpty)
		if i >= p.nEnc { // an inlined embedded struct, by its own name
			for j := 0; j < p.nEnc; j++ {
				if hasPrefix(specs[j].index, s.index) {
					p.fields[i].covers = append(p.fields[i].covers, j)
				}
			}
		}
	}
	p.byName = make(map[string]int, len(fs.byName))
	for name, s := range fs.byName {
		p.byName[name] = pos[s]
	}
	p.steps = cloneSteps(t, p.fields[:p.nEnc], 0)
	p.dropped = fs.dropped
	return nil
}

func hasPrefix(index, prefix []int) bool {
	if len(index) < len(prefix) {
		return false
	}
	for i := range prefix {
		if index[i] != prefix[i] {
			return false
		}
	}
	return true
}

// cloneSteps groups the encoded fields (index paths below depth) by the Go
// field of t they live in.
func cloneSteps(t reflect.Type, fields []field, depth int) []cloneStep {
	var steps []cloneStep
	done := map[int]bool{}
	for _, f := range fields {
		i := f.index[depth]
		if done[i] {
			continue
		}
		done[i] = true
		var whole *plan
		var inner []field
		for _, g := range fields {
			if g.index[depth] != i {
				continue
			}
			if len(g.index) == depth+1 {
				whole = g.plan
			} else {
				inner = append(inner, g)
			}
		}
		if whole != nil {
			steps = append(steps, cloneStep{index: i, plan: whole})
			continue
		}
		ft := t.Field(i).Type
		st := structOf(ft)
		steps = append(steps, cloneStep{index: i, ptr: ft.Kind() == reflect.Pointer, typ: st, sub: cloneSteps(st, inner, depth+1)})
	}
	return steps
}

// settle works out pure, track and templ for new plans, to a fixed point
// (types may be recursive).
func settle(ps []*plan) {
	for _, p := range ps {
		switch p.kind {
		case kMap, kSlice, kPtr, kIface, kBytes:
			p.pure = false
		case kCustom:
			p.pure = !hasRefs(p.typ, 0)
		default:
			p.pure = true
		}
		p.track = p.kind == kStruct
		p.templ = p.kind == kStruct || p.kind == kMap || p.kind == kSlice || p.kind == kBytes
	}
	for changed := true; changed; {
		changed = false
		for _, p := range ps {
			pure, track, templ := p.pure, p.track, p.templ
			switch p.kind {
			case kStruct:
				pure = pure && stepsPure(p.typ, p.steps)
			case kArray:
				pure, track, templ = p.elem.pure, p.elem.track, p.elem.templ
			case kSlice, kMap:
				track = p.elem.track
			case kPtr:
				track, templ = p.elem.track, p.elem.templ
			}
			if pure != p.pure || track != p.track || templ != p.templ {
				p.pure, p.track, p.templ, changed = pure, track, templ, true
			}
		}
	}
}

// stepsPure: every Go field of t is copied whole by a pure plan, or is an
// embedded struct (not a pointer) that is itself copied that way.
func stepsPure(t reflect.Type, steps []cloneStep) bool {
	if len(steps) != t.NumField() {
		return false
	}
	for _, s := range steps {
		switch {
		case s.plan != nil:
			if !s.plan.pure {
				return false
			}
		case s.ptr || !stepsPure(s.typ, s.sub):
			return false
		}
	}
	return true
}

// hasRefs reports whether a value of t holds a reference (so an assignment
// would share memory), looking through unexported fields too.
func hasRefs(t reflect.Type, depth int) bool {
	if depth > 32 {
		return true
	}
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasRefs(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasRefs(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}

// hasIface reports whether t is or holds (as a struct field or array
// element) an interface.
func hasIface(t reflect.Type, depth int) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Array:
		return depth < 32 && hasIface(t.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if depth < 32 && hasIface(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}
