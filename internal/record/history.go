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
//   - f<ver>: a version stored whole: "<at>,<schema>,<schemaMin>" (its write
//     time in ms on the Redis clock, its schema version and min-reader),
//     then its data compressed (zstd) in f<ver>.1, f<ver>.2, ...;
//   - v<ver>: a version stored as a delta (delta.go) against the next newer
//     kept version: its metadata (three uvarints, as above), then the delta,
//     cut into v<ver>, v<ver>.1, v<ver>.2, ...;
//   - d<ver> and t<ver>: a whole version as builds before deltas wrote it:
//     d a 'z' tag byte then the data compressed, t its metadata as text.
//
// Values are cut into chunks of HistChunk bytes so that none passes Redis's
// hash-max-listpack-value (64 by default) and the hash stays a listpack: a
// hashtable costs some 50 bytes per field. A value over HistChunkedMax is
// one field (the hash then is a hashtable, whose overhead such a value
// dwarfs).
//
// The newest kept version is whole. The write that keeps a newer one
// rewrites it as a delta against the new one in the same script, as the
// writer planned it from its read of the history (History.Plan), unless the
// deltas chained to it would then pass the plan's bound or the delta would
// not be smaller. A version only ever depends on newer ones, so trimming
// the oldest never breaks a chain.

// HistChunk is the longest value of a chunked history field.
const HistChunk = 64

// HistChunkedMax is the longest value cut into chunks.
const HistChunkedMax = 32 * HistChunk

// HistChain is the most deltas a read of a kept version applies, as the
// library's writes bound it (History.Rebase's maxChain): one version in 24
// stays whole, so the default history of 24 holds one whole copy.
const HistChain = 23

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
	histWhole    = 'f'
	histDelta    = 'v'
	histTextData = 'd'
	histTextMeta = 't'
	histTextTag  = 'z' // the first byte of a d<ver> value
)

// HistDataField and HistMetaField name version ver's fields in a history
// written whole with text metadata (FormWholeText): its data and
// "<at>,<schema>,<schemaMin>".
func HistDataField(ver int64) string { return "d" + strconv.FormatInt(ver, 10) }

// HistMetaField: see HistDataField.
func HistMetaField(ver int64) string { return "t" + strconv.FormatInt(ver, 10) }

// NewCodec returns a compressor and a decompressor of kept versions, one
// goroutine each at most; the decompressor refuses data that would decode
// past MaxKeptBytes (a damaged frame header). Close both when done.
func NewCodec() (*zstd.Encoder, *zstd.Decoder, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxKeptBytes))
	if err != nil {
		_ = enc.Close()
		return nil, nil, err
	}
	return enc, dec, nil
}

// AppendWholeText appends data as a FormWholeText version's d<ver> value.
func AppendWholeText(dst []byte, enc *zstd.Encoder, data []byte) []byte {
	return enc.EncodeAll(data, append(dst, histTextTag))
}

// AppendWhole appends the body of a version kept whole: data compressed.
// It is what SaveArgs.Keep carries; save.lua writes the metadata beside it.
func AppendWhole(dst []byte, enc *zstd.Encoder, data []byte) []byte { return enc.EncodeAll(data, dst) }

// appendMeta appends k's metadata as a v value begins with it.
func appendMeta(dst []byte, k Kept) []byte {
	var at int64
	if !k.At.IsZero() {
		at = max(k.At.UnixMilli(), 0)
	}
	dst = binary.AppendUvarint(dst, uint64(at))
	dst = binary.AppendUvarint(dst, uint64(max(k.Schema, 0)))
	return binary.AppendUvarint(dst, uint64(max(k.SchemaMin, 0)))
}

// parseMeta reads the metadata a v value begins with into k, and returns
// how many bytes it took.
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

// parseTextMeta reads text metadata (an f<ver> or t<ver> value) into k.
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
	Bytes  int
	fields []string // its fields
	body   []byte   // the compressed data, or the delta
	bad    error    // what makes it unreadable on its own (a chunk missing, its metadata)
}

// History is a record's history hash as one read found it.
type History struct {
	// Versions are the kept versions, oldest first.
	Versions []Stored
	// Seen is the record's hist.at (when it last kept a version) as the read
	// found it: a write that finds it unchanged finds the history so too.
	Seen string
}

// ReadHistory reads the history of the record at key and the record's
// hist.at in one round trip. Only a write that keeps a version changes the
// history, and every such write sets hist.at: a history read with the
// hist.at a write finds is the history that write finds.
func ReadHistory(ctx context.Context, rdb redis.Cmdable, key string) (History, error) {
	var at *redis.StringCmd
	var all *redis.MapStringStringCmd
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		at = p.HGet(ctx, key, FieldHistAt)
		all = p.HGetAll(ctx, HistoryKey(key))
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return History{}, err
	}
	if err := all.Err(); err != nil {
		return History{}, err
	}
	h := ParseHistory(all.Val())
	h.Seen = at.Val()
	return h, nil
}

// ParseHistory reads the fields of a history hash.
func ParseHistory(fields map[string]string) History {
	type parts struct {
		kind   byte
		chunks map[int]string
		names  []string
		text   string // t<ver>
	}
	byVer := map[int64]*parts{}
	for name, value := range fields {
		letter, ver, chunk, ok := histField(name)
		if !ok || (letter == histTextData || letter == histTextMeta) && chunk != 0 {
			continue
		}
		p := byVer[ver]
		if p == nil {
			p = &parts{chunks: map[int]string{}}
			byVer[ver] = p
		}
		p.names = append(p.names, name)
		if letter == histTextMeta {
			p.text = value
			continue
		}
		p.kind = cmpKind(p.kind, letter)
		p.chunks[chunk] = value
	}
	var h History
	for ver, p := range byVer {
		if p.kind == 0 {
			continue // a t<ver> alone: no data to read (save.lua never writes it)
		}
		s := Stored{Kept: Kept{Ver: ver}, fields: p.names}
		for _, c := range p.chunks {
			s.Bytes += len(c)
		}
		switch p.kind {
		case histTextData:
			s.Form, s.Bytes = FormWholeText, s.Bytes+len(p.text)
			parseTextMeta(p.text, &s.Kept)
			s.body = []byte(p.chunks[0])
		case histWhole:
			s.Form = FormWhole
			parseTextMeta(p.chunks[0], &s.Kept)
			delete(p.chunks, 0)
			s.body, s.bad = joinChunks(p.chunks, 1)
		case histDelta:
			s.Form = FormDelta
			s.body, s.bad = joinChunks(p.chunks, 0)
			if n, err := parseMeta(s.body, &s.Kept); err != nil {
				s.bad = errors.Join(s.bad, err)
			} else {
				s.body = s.body[n:]
			}
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

// joinChunks is a value cut into chunks from, from+1, ..., put back
// together.
func joinChunks(chunks map[int]string, from int) ([]byte, error) {
	var b []byte
	for i := from; i < from+len(chunks); i++ {
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

// keptMeta is the version a history field names, from its head as
// versions.lua reads it (the first bytes of an f or v value, a whole t
// value, the whole f<ver> value); ok is false for a field that names none
// (d<ver>, a chunk).
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
	case histWhole:
		k.Form = FormWhole
		parseTextMeta(head, &k)
	case histDelta:
		k.Form = FormDelta
		_, _ = parseMeta([]byte(head), &k) // metadata that does not decode lists the version at time zero
	default:
		return Kept{}, false
	}
	return k, true
}
