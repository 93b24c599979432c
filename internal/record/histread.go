package record

// Reading kept versions: a version stored whole decompresses; one stored as
// a delta applies to the data of its base, down the chain from the whole
// version it leads to. A read streams the chain: it fetches the values a
// few MiB at a time (one HMGET each, so that no call holds Redis for long)
// and holds at most two versions' data at once.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"
)

// readBatchBytes bounds the stored bytes one HMGET of a read fetches (more
// only for a single version that is larger).
const readBatchBytes = 4 << 20

// VersionError says why a kept version does not read.
type VersionError struct {
	Ver int64
	// Needs is the version whose damage makes Ver unreadable: Ver itself,
	// or a newer one a chain of deltas leads Ver to (0: the chain leads
	// nowhere).
	Needs int64
	Err   error
}

func (e *VersionError) Error() string {
	switch e.Needs {
	case 0, e.Ver:
		return fmt.Sprintf("version %d: %v", e.Ver, e.Err)
	}
	return fmt.Sprintf("version %d is stored as a delta that needs version %d, which does not read: %v", e.Ver, e.Needs, e.Err)
}

func (e *VersionError) Unwrap() error { return e.Err }

// chain is the positions of the versions a read of h.Versions[i] decodes,
// from i to the whole version its deltas lead to.
func (h *History) chain(i int) ([]int, error) {
	out := []int{}
	for {
		s := &h.Versions[i]
		out = append(out, i)
		if s.Err != nil {
			return out, &VersionError{Ver: h.Versions[out[0]].Ver, Needs: s.Ver, Err: s.Err}
		}
		if s.Form != FormDelta {
			return out, nil
		}
		j := h.index(s.Base)
		if s.Base == 0 || j < 0 {
			err := fmt.Errorf("it is a delta whose base version %d is not kept", s.Base)
			if s.Base == 0 {
				err = errors.New("it is a delta and no newer version is kept")
			}
			return out, &VersionError{Ver: h.Versions[out[0]].Ver, Needs: s.Ver, Err: err}
		}
		i = j
	}
}

// Read returns the data of kept version ver (nil, nil when it is not
// kept), reading its chain from the history of the record at key.
func (h *History) Read(ctx context.Context, rdb redis.Cmdable, key string, ver int64, dec *zstd.Decoder) ([]byte, error) {
	i := h.index(ver)
	if i < 0 {
		return nil, nil
	}
	path, err := h.chain(i)
	if err != nil {
		return nil, err
	}
	slices.Reverse(path) // the whole version first
	var cur, spare []byte
	for len(path) > 0 {
		batch := h.batch(path)
		if err := h.fetch(ctx, rdb, key, batch); err != nil {
			return nil, err
		}
		for _, j := range batch {
			s := &h.Versions[j]
			out, err := s.decode(spare, cur, dec)
			s.body = nil
			if err != nil {
				return nil, &VersionError{Ver: ver, Needs: s.Ver, Err: err}
			}
			cur, spare = out, cur
		}
		path = path[len(batch):]
	}
	return cur, nil
}

// batch is the first of path's versions whose values add up to at most
// readBatchBytes (at least one).
func (h *History) batch(path []int) []int {
	n, total := 0, 0
	for n < len(path) && (n == 0 || total+h.Versions[path[n]].Bytes <= readBatchBytes) {
		total += h.Versions[path[n]].Bytes
		n++
	}
	return path[:n]
}

// fetch reads the values of the versions at positions idx in one HMGET.
// A version a field of which is missing gets an error in place of its
// value.
func (h *History) fetch(ctx context.Context, rdb redis.Cmdable, key string, idx []int) error {
	var names []string
	for _, i := range idx {
		if h.Versions[i].body == nil {
			names = append(names, h.Versions[i].fields...)
		}
	}
	if len(names) == 0 {
		return nil
	}
	vals, err := rdb.HMGet(ctx, HistoryKey(key), names...).Result()
	if err != nil {
		return fmt.Errorf("read kept versions: %w", err)
	}
	byName := make(map[string]any, len(names))
	for k, n := range names {
		byName[n] = vals[k]
	}
	for _, i := range idx {
		s := &h.Versions[i]
		if s.body == nil {
			s.body, s.missing = s.join(byName)
		}
	}
	return nil
}

// join puts a version's value back together from its fields' values; the
// error names a missing field.
func (s *Stored) join(vals map[string]any) ([]byte, error) {
	var b []byte
	for _, name := range s.fields {
		if _, _, c, _ := histField(name); c == 0 && s.layout == histWhole || name[0] == histTextMeta {
			continue // the metadata, listed already
		}
		v, ok := vals[name].(string)
		if !ok {
			return []byte{}, fmt.Errorf("its field %s is missing", name)
		}
		b = append(b, v...)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// decode makes the version's data, into dst's storage, out of its fetched
// value and (for a delta) its base's data.
func (s *Stored) decode(dst, base []byte, dec *zstd.Decoder) ([]byte, error) {
	if s.missing != nil {
		return nil, s.missing
	}
	body := s.body
	switch s.layout {
	case histKept:
		if len(body) < s.head.n {
			return nil, fmt.Errorf("its value is %d bytes, shorter than its header", len(body))
		}
		return decodeKept(dst, s.Ver, s.head, body[s.head.n:], base, dec)
	case histDelta:
		n := legacyMetaLen(body)
		if n < 0 {
			return nil, errors.New("its metadata does not decode")
		}
		return applyDelta(dst, base, body[n:], MaxKeptBytes)
	case histTextData:
		if len(body) == 0 || body[0] != histTextTag {
			return nil, errors.New("its data is not of a known format")
		}
		body = body[1:]
	}
	if len(body) == 0 {
		return nil, errors.New("its data is empty")
	}
	data, err := dec.DecodeAll(body, dst[:0])
	if err != nil {
		return nil, fmt.Errorf("its data does not decompress: %w", err)
	}
	return data, nil
}

// legacyMetaLen is the length of the three uvarints a v<ver> value begins
// with, or -1.
func legacyMetaLen(b []byte) int {
	n := 0
	for range 3 {
		if n >= len(b) {
			return -1
		}
		m := 0
		for n+m < len(b) && b[n+m]&0x80 != 0 {
			m++
		}
		if n+m >= len(b) || m >= 10 {
			return -1
		}
		n += m + 1
	}
	return n
}

// Health is whether one kept version reads.
type Health struct {
	Kept
	// Err says why it does not read (nil: it does); Needs is then the
	// damaged version it depends on (its own ver: it is damaged itself; 0:
	// its chain leads nowhere).
	Err   error
	Needs int64
}

// Check reads every kept version, newest first, decoding each chain once:
// a delta whose base is the version read just before it applies to that
// data; any other reads its own chain.
func (h *History) Check(ctx context.Context, rdb redis.Cmdable, key string, dec *zstd.Decoder) ([]Health, error) {
	out := make([]Health, 0, len(h.Versions))
	order := make([]int, len(h.Versions))
	for i := range order {
		order[i] = len(order) - 1 - i
	}
	var above []byte
	aboveVer := int64(-1)
	broken := map[int64]int64{} // a version that does not read → the damaged one it needs
	for len(order) > 0 {
		batch := h.batch(order)
		if err := h.fetch(ctx, rdb, key, batch); err != nil {
			return nil, err
		}
		for _, i := range batch {
			hv := h.checkOne(ctx, rdb, key, i, above, aboveVer, broken, dec)
			if hv.Err != nil {
				above, aboveVer = nil, -1
			} else {
				above, aboveVer = h.Versions[i].checked, h.Versions[i].Ver
			}
			h.Versions[i].body, h.Versions[i].checked = nil, nil
			out = append(out, hv)
		}
		order = order[len(batch):]
	}
	return out, nil
}

// checkOne reads version h.Versions[i] for Check: above is the data of
// version aboveVer, read just before it.
func (h *History) checkOne(ctx context.Context, rdb redis.Cmdable, key string, i int, above []byte, aboveVer int64,
	broken map[int64]int64, dec *zstd.Decoder) Health {
	s := &h.Versions[i]
	hv := Health{Kept: s.Kept}
	fail := func(needs int64, err error) Health {
		hv.Err, hv.Needs, broken[s.Ver] = err, needs, needs
		return hv
	}
	if s.Err != nil {
		return fail(s.Ver, s.Err)
	}
	var data []byte
	var err error
	switch {
	case s.Form != FormDelta:
		data, err = s.decode(nil, nil, dec)
	case s.Base == 0 || !h.Has(s.Base):
		_, err = h.chain(i)
		var ve *VersionError
		if errors.As(err, &ve) {
			return fail(0, ve.Err)
		}
	case broken[s.Base] != 0:
		needs := broken[s.Base]
		return fail(needs, fmt.Errorf("it is a delta that needs version %d, which does not read", needs))
	case s.Base == aboveVer:
		data, err = s.decode(nil, above, dec)
	default: // a base read earlier: read the chain again
		s.body = nil
		data, err = h.Read(ctx, rdb, key, s.Ver, dec)
		var ve *VersionError
		if errors.As(err, &ve) && ve.Needs != s.Ver {
			return fail(ve.Needs, ve)
		}
	}
	if err != nil {
		return fail(s.Ver, err)
	}
	s.checked = data
	return hv
}
