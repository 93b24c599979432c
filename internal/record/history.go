package record

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"
)

// The history hash (HistoryKey) holds each kept version under fields named
// by its form and its ver:
//
//   - f<ver>: the version whole, its data compressed (zstd);
//   - v<ver>: the version as a delta (delta.go) against the next newer kept
//     version;
//   - d<ver> and t<ver>: a whole version as builds before deltas wrote it:
//     d a 'z' tag byte then the data compressed, t "<at>,<schema>,<schemaMin>".
//
// An f or v value is the version's metadata (three uvarints: its write time
// in ms on the Redis clock, its schema version, its min-reader), then its
// body. save.lua cuts a value longer than HistChunk into chunks, f<ver>,
// f<ver>.1, f<ver>.2, ..., so that no value passes Redis's
// hash-max-listpack-value (64 by default) and the hash stays a listpack: a
// hashtable costs some 50 bytes per field.
//
// The newest kept version is whole. The write that keeps a newer one
// rewrites it as a delta against the new one in the same script (see
// History.Rebase), unless the deltas chained to it would then pass the
// caller's bound or the delta would not be smaller. A version only ever
// depends on newer ones, so trimming the oldest never breaks a chain.

// HistChunk is the longest value save.lua writes into the history hash.
const HistChunk = 64

// MaxKeptBytes bounds the data a kept version decodes to: Redis's own
// limit on a value.
const MaxKeptBytes = 512<<20 - 1

// Form is how a kept version is stored.
type Form int

const (
	// FormWhole is a version stored whole: f<ver>.
	FormWhole Form = iota + 1
	// FormDelta is a version stored as a delta against the next newer kept
	// version: v<ver>.
	FormDelta
	// FormWholeText is a whole version with its metadata as text: d<ver>
	// and t<ver>.
	FormWholeText
)

func (f Form) String() string {
	switch f {
	case FormWhole:
		return "whole"
	case FormDelta:
		return "delta"
	case FormWholeText:
		return "whole (text metadata)"
	}
	return "form " + strconv.Itoa(int(f))
}

// The first letters of the history hash's fields.
const (
	histWhole     = 'f'
	histDelta     = 'v'
	histTextData  = 'd'
	histTextMeta  = 't'
	histTextTag   = 'z' // the first byte of a d<ver> value
	histMetaBytes = 3 * binary.MaxVarintLen64
)

// HistDataField and HistMetaField name version ver's fields in a history
// written whole with text metadata (FormWholeText): its data and
// "<at>,<schema>,<schemaMin>".
func HistDataField(ver int64) string { return "d" + strconv.FormatInt(ver, 10) }

// HistMetaField: see HistDataField.
func HistMetaField(ver int64) string { return "t" + strconv.FormatInt(ver, 10) }

// AppendWholeText appends data as a FormWholeText version's d<ver> value.
func AppendWholeText(dst []byte, enc *zstd.Encoder, data []byte) []byte {
	return enc.EncodeAll(data, append(dst, histTextTag))
}

// AppendWhole appends the body of a version kept whole: data compressed.
// It is what SaveArgs.Keep carries; save.lua puts the metadata before it.
func AppendWhole(dst []byte, enc *zstd.Encoder, data []byte) []byte { return enc.EncodeAll(data, dst) }

// appendMeta appends k's metadata as f and v values begin with it.
func appendMeta(dst []byte, k Kept) []byte {
	var at int64
	if !k.At.IsZero() {
		at = max(k.At.UnixMilli(), 0)
	}
	dst = binary.AppendUvarint(dst, uint64(at))
	dst = binary.AppendUvarint(dst, uint64(max(k.Schema, 0)))
	return binary.AppendUvarint(dst, uint64(max(k.SchemaMin, 0)))
}

// parseMeta reads the metadata an f or v value begins with into k, and
// returns how many bytes it took.
func parseMeta(b []byte, k *Kept) (int, error) {
	var v [3]uint64
	n := 0
	for i := range v {
		x, m := binary.Uvarint(b[n:])
		if m <= 0 || (i > 0 && x > 1<<31) || x > 1<<53 {
			return 0, errors.New("its metadata does not decode")
		}
		v[i], n = x, n+m
	}
	k.At = msTime(int64(v[0]))
	k.Schema, k.SchemaMin = int(v[1]), int(v[2])
	return n, nil
}

// parseTextMeta reads a t<ver> value into k.
func parseTextMeta(s string, k *Kept) {
	parts := strings.Split(s, ",")
	if len(parts) == 3 {
		k.At = msTime(parts[0])
		k.Schema, _ = strconv.Atoi(parts[1])
		k.SchemaMin, _ = strconv.Atoi(parts[2])
	}
}

// histField splits a history field name into its letter, ver and chunk
// (0 for the first); ok is false for a name of no version.
func histField(name string) (letter byte, ver int64, chunk int, ok bool) {
	if len(name) < 2 {
		return 0, 0, 0, false
	}
	digits, rest, dotted := strings.Cut(name[1:], ".")
	ver, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || ver < 0 {
		return 0, 0, 0, false
	}
	if dotted {
		if chunk, err = strconv.Atoi(rest); err != nil || chunk < 1 {
			return 0, 0, 0, false
		}
	}
	switch name[0] {
	case histWhole, histDelta, histTextData, histTextMeta:
		return name[0], ver, chunk, true
	}
	return 0, 0, 0, false
}

// Stored is one kept version as a read of the history hash found it.
type Stored struct {
	Kept
	// Bytes is what it takes in the hash: every chunk, metadata included.
	Bytes int
	body  []byte // the compressed data, or the delta
	bad   error  // what makes it unreadable on its own (a chunk missing, its metadata)
}

// History is a record's history hash as one read found it.
type History struct {
	// Versions are the kept versions, oldest first.
	Versions []Stored
}

// ReadHistory reads the history of the record at key in one HGETALL (one
// consistent view, even while a save rewrites it).
func ReadHistory(ctx context.Context, rdb redis.Cmdable, key string) (History, error) {
	m, err := rdb.HGetAll(ctx, HistoryKey(key)).Result()
	if err != nil {
		return History{}, err
	}
	return ParseHistory(m), nil
}

// ParseHistory reads the fields of a history hash.
func ParseHistory(fields map[string]string) History {
	type parts struct {
		kind   byte
		chunks map[int]string
		text   string // t<ver>
	}
	byVer := map[int64]*parts{}
	for name, value := range fields {
		letter, ver, chunk, ok := histField(name)
		if !ok {
			continue
		}
		p := byVer[ver]
		if p == nil {
			p = &parts{chunks: map[int]string{}}
			byVer[ver] = p
		}
		switch {
		case letter == histTextMeta:
			p.text = value
		case letter == histTextData && chunk == 0:
			p.kind = cmpKind(p.kind, letter)
			p.chunks[0] = value
		case letter == histWhole || letter == histDelta:
			p.kind = cmpKind(p.kind, letter)
			p.chunks[chunk] = value
		}
	}
	var h History
	for ver, p := range byVer {
		s := Stored{Kept: Kept{Ver: ver}}
		for _, c := range p.chunks {
			s.Bytes += len(c)
		}
		switch p.kind {
		case histTextData:
			s.Form, s.Bytes = FormWholeText, s.Bytes+len(p.text)
			parseTextMeta(p.text, &s.Kept)
			s.body = []byte(p.chunks[0])
		case histWhole, histDelta:
			s.Form = FormWhole
			if p.kind == histDelta {
				s.Form = FormDelta
			}
			s.body, s.bad = joinChunks(p.chunks)
			if n, err := parseMeta(s.body, &s.Kept); err != nil {
				s.bad = errors.Join(s.bad, err)
			} else {
				s.body = s.body[n:]
			}
		default:
			continue // a t<ver> alone: no data to read (as save.lua never writes it)
		}
		h.Versions = append(h.Versions, s)
	}
	slices.SortFunc(h.Versions, func(a, b Stored) int { return cmp.Compare(a.Ver, b.Ver) })
	return h
}

// cmpKind is the form a version's fields give: a version whose fields name
// two forms (only a tool writes that) is read as its first letter's.
func cmpKind(had, letter byte) byte {
	if had != 0 {
		return had
	}
	return letter
}

// joinChunks is a value cut into chunks, put back together.
func joinChunks(chunks map[int]string) ([]byte, error) {
	var b []byte
	for i := range len(chunks) {
		c, ok := chunks[i]
		if !ok {
			return b, fmt.Errorf("its chunk %d is missing", i)
		}
		b = append(b, c...)
	}
	return b, nil
}

// index is the position of ver in h.Versions, or -1.
func (h History) index(ver int64) int {
	i, ok := slices.BinarySearchFunc(h.Versions, ver, func(s Stored, v int64) int { return cmp.Compare(s.Ver, v) })
	if !ok {
		return -1
	}
	return i
}

// Has reports whether version ver is kept.
func (h History) Has(ver int64) bool { return h.index(ver) >= 0 }

// Data is the data of kept version ver, as it was written; nil when it is
// not kept. An error says why it does not read (a *VersionError).
func (h History) Data(ver int64, dec *zstd.Decoder) ([]byte, error) {
	i := h.index(ver)
	if i < 0 {
		return nil, nil
	}
	j := i
	for j < len(h.Versions) && h.Versions[j].Form == FormDelta {
		j++
	}
	if j == len(h.Versions) {
		return nil, &VersionError{Ver: ver, Err: errors.New("it is a delta and no newer version is stored whole")}
	}
	data, err := h.Versions[j].whole(dec)
	for k := j - 1; k >= i && err == nil; k-- {
		data, err = h.Versions[k].apply(data)
		j = k
	}
	if err != nil {
		return nil, &VersionError{Ver: ver, Needs: h.Versions[j].Ver, Err: err}
	}
	return data, nil
}

// whole decodes a version stored whole.
func (s Stored) whole(dec *zstd.Decoder) ([]byte, error) {
	body := s.body
	if s.bad != nil {
		return nil, s.bad
	}
	if s.Form == FormWholeText {
		if len(body) == 0 || body[0] != histTextTag {
			return nil, errors.New("its data is not of a known format")
		}
		body = body[1:]
	}
	if len(body) == 0 {
		return nil, errors.New("its data is empty")
	}
	data, err := dec.DecodeAll(body, nil)
	if err != nil {
		return nil, fmt.Errorf("its data does not decompress: %w", err)
	}
	return data, nil
}

// apply makes a delta's version out of the data of the version above it.
func (s Stored) apply(base []byte) ([]byte, error) {
	if s.bad != nil {
		return nil, s.bad
	}
	return applyDelta(base, s.body, MaxKeptBytes)
}

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

// Health is whether one kept version reads.
type Health struct {
	Stored
	// Err says why it does not read (nil: it does); Needs is then the
	// damaged version it depends on (its own ver: it is damaged itself; 0:
	// no version above it is stored whole).
	Err   error
	Needs int64
}

// Check reads every kept version, newest first, decoding each chain once.
func (h History) Check(dec *zstd.Decoder) []Health {
	out := make([]Health, 0, len(h.Versions))
	var above []byte // the data of the version above, when it reads
	var broken int64 // the damaged version the ones below depend on, while above is nil
	for i := len(h.Versions) - 1; i >= 0; i-- {
		s := h.Versions[i]
		hv := Health{Stored: s}
		var err error
		switch {
		case s.Form != FormDelta:
			above, err = s.whole(dec)
		case above == nil && broken == 0:
			hv.Err = errors.New("it is a delta and no newer version is stored whole")
		case above == nil:
			hv.Err, hv.Needs = fmt.Errorf("it is a delta that needs version %d, which does not read", broken), broken
		default:
			above, err = s.apply(above)
		}
		if err != nil {
			above, broken = nil, s.Ver
			hv.Err, hv.Needs = err, s.Ver
		}
		out = append(out, hv)
	}
	return out
}

// Rebase is the rewrite of a history that the write keeping version ver
// (data, stored whole) may carry: the newest version kept before it, when it
// is stored whole, as a delta against data (its metadata, then the delta:
// SaveArgs.RebaseVer and Rebase). keep is how many versions the write keeps
// (SaveArgs.History); maxChain the most deltas a read of any version may
// have to apply. ok is false when the rewrite would not be sound or
// smaller: the newest version is a delta or does not read, the chain would
// grow past maxChain, the delta is not smaller than the whole copy.
func (h History) Rebase(ver int64, data []byte, keep, maxChain int, dec *zstd.Decoder) (int64, []byte, bool) {
	n := len(h.Versions)
	if n == 0 {
		return 0, nil, false
	}
	p := h.Versions[n-1]
	dropped := max(n+1-keep, 0) // the oldest, trimmed by the same write
	if p.Ver >= ver || p.Form == FormDelta || n-1 < dropped {
		return 0, nil, false
	}
	run := 0
	for k := n - 2; k >= dropped && h.Versions[k].Form == FormDelta; k-- {
		run++
	}
	if run+1 > maxChain {
		return 0, nil, false
	}
	pd, err := h.Data(p.Ver, dec)
	if err != nil {
		return 0, nil, false
	}
	value := appendDelta(appendMeta(nil, p.Kept), data, pd)
	if len(value) >= p.Bytes {
		return 0, nil, false
	}
	return p.Ver, value, true
}

// keptMeta is the version a history field names, from its head as
// versions.lua reads it (the first bytes of an f or v value, a whole t
// value); ok is false for a field that names none (d<ver>, a chunk).
func keptMeta(name, head string) (Kept, bool) {
	letter, ver, chunk, ok := histField(name)
	if !ok || chunk != 0 {
		return Kept{}, false
	}
	k := Kept{Ver: ver}
	switch letter {
	case histTextMeta:
		k.Form = FormWholeText
		parseTextMeta(head, &k)
	case histWhole, histDelta:
		k.Form = FormWhole
		if letter == histDelta {
			k.Form = FormDelta
		}
		_, _ = parseMeta([]byte(head), &k) // metadata that does not decode lists the version at time zero
	default:
		return Kept{}, false
	}
	return k, true
}
