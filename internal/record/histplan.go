package record

// Planning the write that keeps a version: what it trims, what it rewrites
// as a delta, and the fields its values are cut into.

import (
	"slices"
	"strconv"

	"github.com/klauspost/compress/zstd"
)

// HistoryPlan is what a write that keeps a version does to the history
// beside it, planned from a read of the history (SaveArgs.KeepPlan). The
// write follows it only if it finds the record's hist.at still Seen (the
// history as read); otherwise it keeps the version and trims the history
// by itself, rewriting nothing.
type HistoryPlan struct {
	Seen string
	// RewriteVer, when not 0, is the version the write rewrites as Rewrite:
	// the newest kept before the new one, stored whole until then, as its
	// metadata and a delta against the new one.
	RewriteVer int64
	Rewrite    []byte
	// Drop are the fields the write deletes: the rewritten version's, the
	// trimmed versions' (the oldest beyond the write's History), and any of
	// the kept version's own.
	Drop []string
}

// Plan plans the write that keeps version ver (data, stored whole) in
// this history: keep is how many versions the write keeps
// (SaveArgs.History), maxChain the most deltas a read of any version may
// have to apply (HistChain). The newest version kept before ver is
// rewritten as a delta against data unless that is not sound or not
// smaller: it is a delta already or does not read, it is trimmed, the chain
// would grow past maxChain, or the delta is no smaller than it is.
func (h History) Plan(ver int64, data []byte, keep, maxChain int, dec *zstd.Decoder) HistoryPlan {
	plan := HistoryPlan{Seen: h.Seen}
	vs := h.Versions
	if i := h.index(ver); i >= 0 { // kept already (a retried write): replaced
		plan.Drop = append(plan.Drop, vs[i].fields...)
		vs = slices.Delete(slices.Clone(vs), i, i+1)
	}
	trim := max(len(vs)+1-keep, 0)
	for _, s := range vs[:min(trim, len(vs))] {
		plan.Drop = append(plan.Drop, s.fields...)
	}
	n := len(vs)
	if n == 0 || n-1 < trim {
		return plan
	}
	p := vs[n-1]
	run := 0
	for k := n - 2; k >= trim && vs[k].Form == FormDelta; k-- {
		run++
	}
	if p.Ver > ver || p.Form == FormDelta || run+1 > maxChain {
		return plan
	}
	pd, err := h.Data(p.Ver, dec)
	if err != nil {
		return plan
	}
	value := appendDelta(appendMeta(nil, p.Kept), data, pd)
	if len(value) >= p.Bytes {
		return plan
	}
	plan.RewriteVer, plan.Rewrite = p.Ver, value
	plan.Drop = append(plan.Drop, p.fields...)
	return plan
}

// histChunks appends to dst the fields that hold value under name: name
// and its chunks name.1, name.2 ... from chunk from (1 for the data of an
// f<ver>, whose chunk 0 is its metadata), or one field when value is over
// HistChunkedMax.
func histChunks(dst []any, name string, from int, value []byte) []any {
	if len(value) > HistChunkedMax {
		return append(dst, chunkName(name, from), value)
	}
	for i, c := 0, from; i < len(value); i, c = i+HistChunk, c+1 {
		dst = append(dst, chunkName(name, c), value[i:min(i+HistChunk, len(value))])
	}
	return dst
}

// histField0 is the first field of version ver in the form letter names.
func histField0(letter byte, ver int64) string { return string(letter) + strconv.FormatInt(ver, 10) }

// chunkName is the name of chunk c of the field name.
func chunkName(name string, c int) string {
	if c == 0 {
		return name
	}
	return name + "." + strconv.Itoa(c)
}
