package datacodec

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/ckernel/playerdata/internal/msgpackwire"
)

// Unknown is what a stored record held that T does not know: fields a
// newer server wrote, at the top level or anywhere below (nested structs,
// map entries, pointers, slice elements). Decode returns it and Encode
// writes it back where it was. It is nil when there is nothing unknown.
//
// An Unknown never changes after Decode returns it, so it may be kept with
// the value, shared by its clones, and used by concurrent Encodes.
type Unknown struct {
	root *node
	plan *plan // T's plan: an Unknown fits only the codec that made it
}

// node holds the unknown fields at one place of the value and below. Its
// shape follows the plan of that place (pointers are transparent).
type node struct {
	raw   []rawEntry       // struct: the unknown fields, in canonical key order
	kids  []*node          // struct: by encoded field; array: by index
	keyed map[string]*node // map: by the key's encoding
	elems []elemNode       // slice: by the element's known content
}

// rawEntry is one unknown struct field, its key's encoding followed by its
// value's, both canonical.
type rawEntry struct {
	kv   []byte
	klen int
}

// elemNode is the unknown content of the stored slice element at index,
// given back to an element whose known fields still encode to known.
type elemNode struct {
	index int
	known string
	n     *node
}

// sortRaw puts the unknown fields in canonical key order; of a key stored
// twice, the later value is kept (as a decoder would).
func (n *node) sortRaw() {
	if len(n.raw) < 2 {
		return
	}
	slices.SortStableFunc(n.raw, func(a, b rawEntry) int { return compareKeys(a.kv[:a.klen], b.kv[:b.klen]) })
	out := n.raw[:1]
	for _, r := range n.raw[1:] {
		if last := &out[len(out)-1]; compareKeys(last.kv[:last.klen], r.kv[:r.klen]) == 0 {
			*last = r
			continue
		}
		out = append(out, r)
	}
	n.raw = out
}

// Paths lists where the unknown fields are, by their stored names, sorted:
// "Settings.Subtitles", `Inventory["sword"].Enchant`, "Quests[2].Progress"
// (the index the element had when it was decoded). For logs and tools.
func (u *Unknown) Paths() []string {
	if u == nil {
		return nil
	}
	var out []string
	walkUnknown(u.plan, u.root, "", &out)
	slices.Sort(out)
	return out
}

func walkUnknown(p *plan, n *node, path string, out *[]string) {
	for p.kind == kPtr {
		p = p.elem
	}
	switch p.kind {
	case kStruct:
		for _, r := range n.raw {
			k := r.kv[:r.klen]
			if name, ok := keyString(k); ok {
				*out = append(*out, joinPath(path, name))
			} else {
				*out = append(*out, path+"["+showKey(k)+"]")
			}
		}
		for i, kid := range n.kids {
			if kid != nil {
				walkUnknown(p.fields[i].plan, kid, joinPath(path, p.fields[i].name), out)
			}
		}
	case kMap:
		for k, kid := range n.keyed {
			walkUnknown(p.elem, kid, path+"["+showKey([]byte(k))+"]", out)
		}
	case kSlice:
		for _, e := range n.elems {
			walkUnknown(p.elem, e.n, path+"["+strconv.Itoa(e.index)+"]", out)
		}
	case kArray:
		for i, kid := range n.kids {
			if kid != nil {
				walkUnknown(p.elem, kid, path+"["+strconv.Itoa(i)+"]", out)
			}
		}
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func keyString(k []byte) (string, bool) {
	if len(k) == 0 || !msgpackwire.IsStr(k[0]) {
		return "", false
	}
	r := msgpackwire.Reader{B: k, Off: 1}
	p, _, err := r.Str(k[0], "")
	return string(p), err == nil
}

// showKey renders an encoded map key: a quoted string, a number, or hex.
func showKey(k []byte) string {
	if s, ok := keyString(k); ok {
		return strconv.Quote(s)
	}
	v := viewKey(k)
	switch v.class {
	case classInt:
		if v.neg {
			return strconv.FormatInt(int64(v.u), 10)
		}
		return strconv.FormatUint(v.u, 10)
	case classBool:
		return strconv.FormatBool(v.u == 1)
	case classFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return "0x" + strings.ToUpper(hex.EncodeToString(k))
}
