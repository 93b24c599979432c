package datacodec

import (
	"reflect"
	"strings"

	"github.com/ckernel/playerdata/internal/enum"
)

// LossyField is a field of the stored type whose value does not come back
// from storage as it went in.
type LossyField struct {
	// Path names the field by its Go selector from the stored type, with
	// "[]" for an element of a slice, array or map and "{key}" for a map
	// key: "Player.Stats.secret", "Player.Bag[]", "Player.Quests[].Extra".
	Path string
	// Loss says what happens to its value.
	Loss Loss
}

// String names the field and its loss.
func (f LossyField) String() string { return f.Path + ": " + f.Loss.String() }

// Loss is how a field fails to round-trip.
type Loss uint8

const (
	// LossUnexported: msgpack skips unexported fields, so the value is
	// not stored and comes back as the zero value.
	LossUnexported Loss = iota + 1
	// LossInterface: an interface-typed value (any) is written by its
	// dynamic type and read back as msgpack's own types: an int as int8, a
	// struct as map[string]any, a []string as []any.
	LossInterface
)

// String says what the loss does to the value.
func (l Loss) String() string {
	if name, ok := enum.Name(l, "", "unexported field: not stored, it loads as the zero value",
		"interface-typed: it loads as msgpack's own types (an int as int8, a struct as a map)"); ok {
		return name
	}
	return "unknown loss"
}

// LossyFields lists the places in T whose values do not round-trip:
// unexported fields and interface-typed values, at any depth (nested
// structs, map keys and values, slice and array elements, behind
// pointers), each struct type once, in declaration order. Fields tagged
// `msgpack:"-"` are not stored at all and are not listed, nor is anything
// inside a type that encodes itself (see the package doc's Limits).
func (c *Codec[T]) LossyFields() []LossyField {
	var out []LossyField
	seen := map[*plan]bool{}
	var walk func(p *plan, path string)
	walk = func(p *plan, path string) {
		if p.kind == kIface {
			out = append(out, LossyField{Path: path, Loss: LossInterface})
			return
		}
		if seen[p] {
			return
		}
		seen[p] = true
		switch p.kind {
		case kStruct:
			for _, name := range p.dropped {
				out = append(out, LossyField{Path: path + "." + name, Loss: LossUnexported})
			}
			for _, f := range p.fields[:p.nEnc] {
				walk(f.plan, path+"."+goSelector(p.typ, f.index))
			}
		case kMap:
			walk(p.key, path+"{key}")
			walk(p.elem, path+"[]")
		case kSlice, kArray:
			walk(p.elem, path+"[]")
		case kPtr:
			walk(p.elem, path)
		}
	}
	walk(c.root, typeName(c.root.typ))
	return out
}

// goSelector is the Go selector of the field at index in struct t
// ("Base.Coins" for a field of an inlined embedded struct).
func goSelector(t reflect.Type, index []int) string {
	names := make([]string, len(index))
	for i, x := range index {
		t = structOf(t)
		f := t.Field(x)
		names[i], t = f.Name, f.Type
	}
	return strings.Join(names, ".")
}

// typeName is how a path starts: the type's own name, without its package.
func typeName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}
