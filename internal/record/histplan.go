package record

// Planning the write that keeps a version: what it trims, and the previous
// newest version rewritten.

import (
	"cmp"

	"github.com/klauspost/compress/zstd"
)

// HistoryPlan is what a write that keeps a version does to the history
// beside it, planned from a listing of the history (ListForKeep). The write
// follows it only if it finds the record's hist.at still Seen (the history
// as listed); otherwise it keeps the version and trims the history by
// count by itself, rewriting nothing.
type HistoryPlan struct {
	Seen string
	// RewriteVer, when not 0, is the version the write rewrites as
	// Rewrite: the newest kept before the new one, as a delta against the
	// new one, or whole in the current layout when it was of an earlier
	// one.
	RewriteVer int64
	Rewrite    KeptValue
	// Drop are the fields the write deletes: the rewritten version's, the
	// trimmed versions', and any of the kept version's own.
	Drop []string
	// TrimmedCount and TrimmedBytes count the versions trimmed, beyond the
	// history's count and beyond its byte budget; Bytes is what the kept
	// versions take after the write, and Kept how many there are.
	TrimmedCount, TrimmedBytes int
	Bytes, Kept                int
}

// MaxTrimBytes bounds the kept versions one write trims: past it the
// oldest beyond the bounds wait for the next writes that keep a version,
// so that no write holds Redis for long freeing a history whose bounds were
// lowered (or one an earlier build let grow).
const MaxTrimBytes = 64 << 20

// KeepSpec is the version a write keeps and the bounds of the history.
type KeepSpec struct {
	Ver   int64
	Data  []byte
	Value KeptValue // Data whole (NewKeptWhole, its prev History.Newest)
	// Count and Budget bound the kept versions, the new one included: how
	// many (History) and their bytes (HistoryBytes; the new one is kept
	// whatever its size). MaxChain is the most deltas a read may apply
	// (HistChain). MaxTrim bounds the bytes of versions the write trims
	// (0: MaxTrimBytes).
	Count, Budget, MaxChain, MaxTrim int
}

// Plan plans the write that keeps k in this history. The oldest versions
// go first, beyond k.Count and beyond k.Budget bytes. The newest version
// kept before k is rewritten as a delta against k.Data unless that is not
// sound or not smaller: it is a delta already or does not read (its value
// must have come with the listing), it is trimmed, the deltas chained to it
// would pass k.MaxChain, or the delta is no smaller than it is. A version
// of an earlier layout that is not rewritten as a delta is rewritten whole
// in the current layout (its metadata checksummed from then on).
func (h *History) Plan(k KeepSpec, dec *zstd.Decoder) HistoryPlan {
	plan := HistoryPlan{Seen: h.Seen, Kept: 1, Bytes: k.Value.Len()}
	var vs []int // the versions besides k's, oldest first
	for i := range h.Versions {
		if s := &h.Versions[i]; s.Ver == k.Ver { // kept already (a retried write): replaced
			plan.Drop = append(append(plan.Drop, s.fields...), s.extra...)
		} else {
			vs = append(vs, i)
		}
	}
	// Keep the newest that fit, newest first; the rest go.
	keep := len(vs)
	for j := len(vs) - 1; j >= 0; j-- {
		s := &h.Versions[vs[j]]
		if plan.Kept+1 > k.Count {
			plan.TrimmedCount = j + 1
			break
		}
		if plan.Bytes+s.Bytes > k.Budget {
			plan.TrimmedBytes = j + 1
			break
		}
		plan.Kept, plan.Bytes, keep = plan.Kept+1, plan.Bytes+s.Bytes, j
	}
	// The oldest go first, at most MaxTrimBytes of them (at least one): the
	// others stay, over the bounds, for the next writes.
	trimmed, maxTrim := 0, cmp.Or(k.MaxTrim, MaxTrimBytes)
	for n, i := range vs[:keep] {
		s := &h.Versions[i]
		if n > 0 && trimmed+s.Bytes > maxTrim {
			plan.Kept += keep - n
			for _, j := range vs[n:keep] {
				plan.Bytes += h.Versions[j].Bytes
			}
			plan.TrimmedCount, plan.TrimmedBytes = min(plan.TrimmedCount, n), min(plan.TrimmedBytes, n)
			keep = n
			break
		}
		trimmed += s.Bytes
		plan.Drop = append(append(plan.Drop, s.fields...), s.extra...)
	}
	vs = vs[keep:]
	if len(vs) == 0 {
		return plan
	}
	p := &h.Versions[vs[len(vs)-1]]
	if p.Ver > k.Ver || p.Form == FormDelta || p.Err != nil || p.body == nil {
		return plan
	}
	pd, err := p.decode(nil, nil, dec)
	if err != nil {
		return plan
	}
	meta := KeptMeta{At: p.At, Schema: p.Schema, SchemaMin: p.SchemaMin}
	prev := p.head.prev // an earlier layout's: not known
	value := KeptValue{}
	if h.height(vs, p.Ver)+1 <= k.MaxChain {
		value = keptDeltaOf(p.Ver, prev, meta, pd, k.Ver, k.Data)
	}
	if value.Len() == 0 || value.Len() >= p.Bytes {
		if !p.Legacy {
			return plan
		}
		body := p.body
		if p.layout == histTextData {
			body = body[1:] // decoded: it has its tag
		}
		value = keptWholeOf(p.Ver, prev, meta, pd, body)
	}
	plan.RewriteVer, plan.Rewrite = p.Ver, value
	plan.Drop = append(append(plan.Drop, p.fields...), p.extra...)
	plan.Bytes += value.Len() - p.Bytes
	return plan
}

// height is the most deltas a read of any of the versions at positions vs
// applies to reach version ver (0: none reaches it through a delta).
func (h *History) height(vs []int, ver int64) int {
	most := 0
	for _, i := range vs {
		n := 0
		for s := &h.Versions[i]; s.Ver != ver; {
			if s.Form != FormDelta || s.Err != nil {
				n = 0
				break
			}
			j := h.index(s.Base)
			if j < 0 {
				n = 0
				break
			}
			s, n = &h.Versions[j], n+1
		}
		most = max(most, n)
	}
	return most
}

// Newest is the newest kept version older than ver (0: none): the prev of
// a version ver kept now.
func (h History) Newest(ver int64) int64 {
	for i := len(h.Versions) - 1; i >= 0; i-- {
		if v := h.Versions[i].Ver; v < ver {
			return v
		}
	}
	return 0
}
