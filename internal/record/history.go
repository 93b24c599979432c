package record

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The history hash (HistoryKey) holds each kept version under fields named
// by its layout and its ver:
//
//   - k<ver>, k<ver>.1, ...: the current layout (kept.go): a checksummed
//     header (time, schema, form, base version, data checksum), then the
//     data compressed, or a delta against its base version;
//   - f<ver> (its metadata as text, "<at>,<schema>,<schemaMin>") and
//     f<ver>.1, ... (its data compressed), or v<ver>, v<ver>.1, ... (three
//     uvarints of metadata, then a delta against the next newer version
//     with its checksum): the layout of the builds between deltas and
//     checksummed metadata;
//   - d<ver> ('z', then the data compressed) and t<ver> (its metadata as
//     text): the layout of the builds before deltas.
//
// This build writes only k fields and reads all three. A version of an
// earlier layout is rewritten in the current one when it is the newest
// kept before a new one (History.Plan), and the rest go as they are
// trimmed: their metadata was never checksummed, so it is validated (a
// time and schemas that parse, in order) rather than proven.
//
// Values are cut into chunks of HistChunk bytes so that none passes Redis's
// hash-max-listpack-value (64 by default) and the hash stays a listpack: a
// hashtable costs some 50 bytes per field. A value over HistChunkedMax is
// two fields, its header and its body (the hash then is a hashtable, whose
// overhead such a value dwarfs).
//
// The newest kept version is whole; the write that keeps a newer one
// rewrites it as a delta against the new one (History.Plan), unless the
// deltas chained to it would then pass HistChain or the delta would not be
// smaller. A version only ever depends on newer ones, so trimming the
// oldest never breaks a chain.

// HistChunk is the longest value of a chunked history field.
const HistChunk = 64

// HistChunkedMax is the longest value cut into chunks.
const HistChunkedMax = 32 * HistChunk

// HistChain is the most deltas a read of a kept version applies, as the
// library's writes bound it (History.Plan's maxChain): one version in 24
// stays whole, so the default history of 24 holds one whole copy.
const HistChain = 23

// MaxKeptBytes bounds the data a kept version decodes to: Redis's own
// limit on a value.
const MaxKeptBytes = 512<<20 - 1

// Form is how a kept version is stored.
type Form int

const (
	// FormWhole is a version stored whole (k<ver>, or f<ver> in the
	// previous layout).
	FormWhole Form = iota + 1
	// FormDelta is a version stored as a delta against a newer kept
	// version (k<ver>, or v<ver> in the previous layout).
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
	histKept     = 'k'
	histWhole    = 'f'
	histDelta    = 'v'
	histTextData = 'd'
	histTextMeta = 't'
	histTextTag  = 'z' // the first byte of a d<ver> value
)

// Kept is one version kept in a record's history hash, as a listing of it
// read it.
type Kept struct {
	Ver int64
	// At is when that data was written (Redis clock); Schema and SchemaMin
	// are its schema version and min-reader. All three are unknown when Err
	// is set.
	At                time.Time
	Schema, SchemaMin int
	// Form is how it is stored; Base the version a delta applies to (for a
	// delta of an earlier layout, the next newer kept version).
	Form Form
	Base int64
	// Legacy: stored by an earlier build, whose metadata carries no
	// checksum (validated, not proven).
	Legacy bool
	// Bytes is what it takes in the hash (every chunk, metadata included).
	Bytes int
	// Err says why its metadata does not read (a damaged header, a field
	// missing): it is listed at no time and cannot be read.
	Err error
}

// Stored is one kept version as a listing of the history hash found it.
type Stored struct {
	Kept
	layout byte     // its fields' letter: histKept, histWhole, histDelta or histTextData
	fields []string // its fields: for a k version those its value is cut into, in order
	extra  []string // fields of its ver that are not part of it (a tool's): dropped with it
	head   keptHead // a k version's header
	meta   string   // an f or t version's text metadata; a v version's value when listed
	body   []byte   // its value once fetched (for an f version its data chunks, for a d one the d value)
	// missing says which of its fields a fetch did not find; checked is
	// its data while Check needs it.
	missing error
	checked []byte
}

// History is a record's history hash as one listing found it: its
// versions' fields and metadata (versions.lua), no data.
type History struct {
	// Versions are the kept versions, oldest first.
	Versions []Stored
	// Seen is the record's hist.at (when it last kept a version) as the
	// listing found it: a write that finds it unchanged finds the history
	// so too.
	Seen string
}

// histField splits a history field name into its letter, ver and chunk
// (0 for the first); ok is false for a name of no version.
func histField(name string) (letter byte, ver int64, chunk int, ok bool) {
	if len(name) < 2 {
		return 0, 0, 0, false
	}
	digits, rest, dotted := strings.Cut(name[1:], ".")
	ver, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || ver < 0 || digits != strconv.FormatInt(ver, 10) {
		return 0, 0, 0, false
	}
	if dotted {
		if chunk, err = strconv.Atoi(rest); err != nil || chunk < 1 || rest != strconv.Itoa(chunk) {
			return 0, 0, 0, false
		}
	}
	switch name[0] {
	case histKept, histWhole, histDelta, histTextData, histTextMeta:
		return name[0], ver, chunk, true
	}
	return 0, 0, 0, false
}

// listedField is one field of versions.lua's listing.
type listedField struct {
	name string
	head *string // its value when the listing read it
	size int     // HSTRLEN when the listing read it, else -1
}

// parseListing makes the History of a listing's fields.
func parseListing(fields []listedField) History {
	type group struct {
		byLetter map[byte][]listedField
	}
	byVer := map[int64]*group{}
	for _, f := range fields {
		letter, ver, _, ok := histField(f.name)
		if !ok {
			continue
		}
		g := byVer[ver]
		if g == nil {
			g = &group{byLetter: map[byte][]listedField{}}
			byVer[ver] = g
		}
		g.byLetter[letter] = append(g.byLetter[letter], f)
	}
	var h History
	for ver, g := range byVer {
		if s, ok := storedOf(ver, g.byLetter); ok {
			h.Versions = append(h.Versions, s)
		}
	}
	slices.SortFunc(h.Versions, func(a, b Stored) int { return cmp.Compare(a.Ver, b.Ver) })
	h.resolveLegacy()
	h.findMissing()
	return h
}

// findMissing lists, as versions that do not read, those that a kept
// version names as kept just before it and that are gone from between two
// kept ones: a tool deleted every field of theirs. (Trims take the oldest:
// a version older than every kept one is not missed.)
func (h *History) findMissing() {
	var gone []Stored
	for i := 1; i < len(h.Versions); i++ {
		s := &h.Versions[i]
		if p := s.head.prev; s.layout == histKept && s.Err == nil && p > h.Versions[i-1].Ver {
			gone = append(gone, Stored{Kept: Kept{Ver: p,
				Err: fmt.Errorf("every field of it is gone, while version %d says it was kept just before it", s.Ver)}})
		}
	}
	if len(gone) > 0 {
		h.Versions = append(h.Versions, gone...)
		slices.SortFunc(h.Versions, func(a, b Stored) int { return cmp.Compare(a.Ver, b.Ver) })
	}
}

// storedOf is the version ver whose fields the listing grouped by letter:
// the current layout's first, then the earlier ones (only a tool writes one
// ver in two layouts; the other's fields go with it).
func storedOf(ver int64, byLetter map[byte][]listedField) (Stored, bool) {
	s := Stored{Kept: Kept{Ver: ver}}
	for _, l := range []byte{histKept, histWhole, histDelta, histTextData} {
		if len(byLetter[l]) > 0 {
			s.layout = l
			break
		}
	}
	if s.layout == 0 {
		return s, false // a t<ver> alone: no data to read (no build writes it)
	}
	for l, fs := range byLetter {
		mine := l == s.layout || s.layout == histTextData && l == histTextMeta
		for _, f := range fs {
			if !mine {
				s.extra = append(s.extra, f.name)
			}
		}
	}
	switch s.layout {
	case histKept:
		s.parseKept(byLetter[histKept])
	default:
		s.parseLegacy(byLetter)
	}
	return s, true
}

// chunk0 finds the first chunk of a field group.
func chunk0(fs []listedField) (listedField, bool) {
	for _, f := range fs {
		if _, _, c, _ := histField(f.name); c == 0 {
			return f, true
		}
	}
	return listedField{}, false
}

// parseKept reads a k version's header from its first chunk.
func (s *Stored) parseKept(fs []listedField) {
	f0, ok := chunk0(fs)
	switch {
	case !ok:
		s.Err = errors.New("its first field is missing")
	case f0.head == nil:
		s.Err = fmt.Errorf("its first field is %d bytes: not what this library writes", f0.size)
	}
	for _, f := range fs {
		s.fields = append(s.fields, f.name)
	}
	if s.Err != nil {
		return
	}
	h, err := parseHead(s.Ver, []byte(*f0.head))
	if err != nil {
		s.Err = err
		return
	}
	s.head, s.At, s.Schema, s.SchemaMin = h, h.At, h.Schema, h.SchemaMin
	s.Form, s.Base, s.Bytes = FormWhole, h.base, h.n+h.bodyLen
	if h.form == keptDelta {
		s.Form = FormDelta
	}
	// The fields the value is cut into, in order; any other of its letter
	// is a tool's, dropped with it.
	want := keptFieldCount(s.Bytes)
	name := histField0(histKept, s.Ver)
	s.fields = s.fields[:0]
	for c := range want {
		s.fields = append(s.fields, chunkName(name, c))
	}
	for _, f := range fs {
		if _, _, c, _ := histField(f.name); c >= want {
			s.extra = append(s.extra, f.name)
		}
	}
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

// Kept lists the kept versions, oldest first.
func (h History) Kept() []Kept {
	out := make([]Kept, len(h.Versions))
	for i, s := range h.Versions {
		out[i] = s.Kept
	}
	return out
}

// Bytes is what the kept versions take in the hash.
func (h History) Bytes() int {
	n := 0
	for _, s := range h.Versions {
		n += s.Bytes
	}
	return n
}

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

// histChunks appends to dst the fields that hold value under name: name
// and its chunks name.1, name.2 ... from chunk from, or one field when
// value is over HistChunkedMax.
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
