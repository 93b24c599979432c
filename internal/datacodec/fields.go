package datacodec

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
)

// The rules by which msgpack v5 names a struct's fields (its getFields,
// inlineFields and shouldInline), and which types it encodes its own way.

// isCustom reports whether msgpack encodes t its own way: t implements
// one of msgpack's or encoding's (un)marshaler interfaces (on the value or
// on a pointer), or msgpack has an encoder registered for it (time.Time,
// RegisterExt), which a probe of the zero value shows.
func isCustom(t reflect.Type, tag string) bool {
	ifaces := []reflect.Type{
		reflect.TypeFor[msgpack.CustomEncoder](), reflect.TypeFor[msgpack.CustomDecoder](),
		reflect.TypeFor[msgpack.Marshaler](), reflect.TypeFor[msgpack.Unmarshaler](),
		reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.BinaryUnmarshaler](),
		reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
	}
	for _, i := range ifaces {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	if t == reflect.TypeFor[time.Time]() {
		return true
	}
	if t.PkgPath() == "" && t.Kind() != reflect.Struct {
		return false // an unnamed type cannot be registered apart from its parts
	}
	b := probe(t, tag)
	if len(b) == 0 {
		return false
	}
	if msgpackwire.IsExt(b[0]) {
		return true
	}
	return t.Kind() == reflect.Struct && !msgpackwire.IsMap(b[0]) && !(msgpackwire.IsArray(b[0]) && asArray(t, tag))
}

// probe is msgpack's encoding of t's zero value; nil if it fails.
func probe(t reflect.Type, tag string) (b []byte) {
	defer func() {
		if recover() != nil {
			b = nil
		}
	}()
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	var w strings.Builder
	enc.Reset(&w)
	enc.SetCustomStructTag(tag)
	if enc.EncodeValue(reflect.New(t).Elem()) != nil {
		return nil
	}
	return []byte(w.String())
}

func asArray(t reflect.Type, tag string) bool {
	f, ok := t.FieldByName("_msgpack")
	if !ok {
		return false
	}
	_, opts := parseTag(fieldTag(f, tag))
	return opts.has("as_array") || opts.has("asArray")
}

func fieldTag(f reflect.StructField, tag string) string {
	s := f.Tag.Get("msgpack")
	if s == "" && tag != "" {
		s = f.Tag.Get(tag)
	}
	return s
}

type tagOptions map[string]string

func (o tagOptions) has(name string) bool { _, ok := o[name]; return ok }

// parseTag splits a struct tag as vmihailenco/tagparser does for the usual
// forms: "name,opt,key:value"; a first part with a colon is an option and
// leaves the name empty.
func parseTag(s string) (string, tagOptions) {
	var name string
	opts := tagOptions{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if k, v, ok := strings.Cut(part, ":"); ok {
			opts[strings.TrimSpace(k)] = strings.TrimSpace(v)
			continue
		}
		if i == 0 {
			name = part
		} else if part != "" {
			opts[part] = ""
		}
	}
	return name, opts
}

// fieldSet is msgpack's fields: the encoded list, and every name decoding
// accepts (which adds aliases and the names of inlined embedded structs).
type fieldSet struct {
	list   []*fieldSpec
	byName map[string]*fieldSpec
	// dropped are the unexported fields msgpack skips, by Go selector from
	// the struct ("secret", "Base.secret" inside an inlined embedded struct).
	dropped []string
}

type fieldSpec struct {
	name      string
	goName    string // the Go field's name
	index     []int
	omitEmpty bool
	typ       reflect.Type
	where     string
}

func (fs *fieldSet) add(f *fieldSpec) {
	fs.byName[f.name] = f
	fs.list = append(fs.list, f)
}

// collect mirrors msgpack v5's getFields.
func (pl *planner) collect(t reflect.Type, where string) (*fieldSet, error) {
	if pl.active[t] {
		return nil, fmt.Errorf("%w: %s: %s embeds itself", ErrInvalidOptions, where, t)
	}
	pl.active[t] = true
	defer delete(pl.active, t)
	fs := &fieldSet{byName: map[string]*fieldSpec{}}
	var omitEmpty bool
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts := parseTag(fieldTag(f, pl.tag))
		if name == "-" {
			continue
		}
		if f.Name == "_msgpack" && opts.has("omitempty") {
			omitEmpty = true
		}
		if !f.IsExported() && !f.Anonymous {
			if f.Name != "_msgpack" && f.Name != "_" { // tag carrier, padding
				fs.dropped = append(fs.dropped, f.Name)
			}
			continue
		}
		fw := where + "." + f.Name
		if opts.has("intern") {
			return nil, fmt.Errorf("%w: %s: the intern tag option is not supported", ErrInvalidOptions, fw)
		}
		if name == "" {
			name = f.Name
		}
		spec := &fieldSpec{name: name, goName: f.Name, index: []int{i}, omitEmpty: omitEmpty || opts.has("omitempty"), typ: f.Type, where: fw}
		if f.Anonymous && !opts.has("noinline") {
			inline := opts.has("inline")
			var err error
			if inline {
				_, err = pl.inlineIf(fs, spec, false)
			} else {
				inline, err = pl.shouldInline(fs, spec)
			}
			if err != nil {
				return nil, err
			}
			if inline {
				fs.byName[spec.name] = spec
				continue
			}
		}
		fs.add(spec)
		if alias, ok := opts["alias"]; ok {
			fs.byName[alias] = spec
		}
	}
	return fs, nil
}

func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// inlineIf adds the embedded struct's fields that no earlier field
// shadows (msgpack's inlineFields); with onlyIfFree (its shouldInline) it
// adds nothing if any name is taken. It reports whether it inlined.
func (pl *planner) inlineIf(fs *fieldSet, emb *fieldSpec, onlyIfFree bool) (bool, error) {
	t := structOf(emb.typ)
	if t.Kind() != reflect.Struct {
		return false, fmt.Errorf("%w: %s: inline on a %s, not a struct", ErrInvalidOptions, emb.where, emb.typ)
	}
	sub, err := pl.collect(t, emb.where)
	if err != nil {
		return false, err
	}
	if onlyIfFree {
		for _, f := range sub.list {
			if _, ok := fs.byName[f.name]; ok {
				return false, nil
			}
		}
	}
	for _, f := range sub.list {
		if _, ok := fs.byName[f.name]; ok {
			continue // shadowed
		}
		g := *f
		g.index = append(append(make([]int, 0, len(emb.index)+len(f.index)), emb.index...), f.index...)
		fs.add(&g)
	}
	for _, d := range sub.dropped {
		fs.dropped = append(fs.dropped, emb.goName+"."+d)
	}
	return true, nil
}

func (pl *planner) shouldInline(fs *fieldSet, emb *fieldSpec) (bool, error) {
	t := structOf(emb.typ)
	if t.Kind() != reflect.Struct || isCustom(t, pl.tag) {
		return false, nil
	}
	return pl.inlineIf(fs, emb, true)
}
