package record

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// The layouts earlier builds wrote, which this one reads (history.go):
// their parsing, and their writing, here only for tests and for the
// bench's figures beside them.

// AppendLegacyWhole appends the field/value pairs of version ver stored
// whole as the builds between deltas and checksummed metadata wrote it:
// f<ver> its metadata as text, f<ver>.1 ... its data compressed.
func AppendLegacyWhole(dst []any, ver int64, meta KeptMeta, data []byte, enc *zstd.Encoder) []any {
	name := histField0(histWhole, ver)
	dst = append(dst, name, fmt.Sprintf("%d,%d,%d", meta.At.UnixMilli(), meta.Schema, meta.SchemaMin))
	return histChunks(dst, name, 1, enc.EncodeAll(data, nil))
}

// AppendLegacyDelta appends the field/value pairs of version ver stored as
// a delta against base (the next newer version's data) as those builds
// wrote it: v<ver>, v<ver>.1 ... its metadata (three uvarints), the delta
// and its checksum.
func AppendLegacyDelta(dst []any, ver int64, meta KeptMeta, data, base []byte) []any {
	v := binary.AppendUvarint(nil, uint64(meta.At.UnixMilli()))
	v = binary.AppendUvarint(v, uint64(meta.Schema))
	v = binary.AppendUvarint(v, uint64(meta.SchemaMin))
	return histChunks(dst, histField0(histDelta, ver), 0, appendDelta(v, base, data))
}

// HistDataField and HistMetaField name version ver's fields in a history
// written whole with text metadata (FormWholeText), as the builds before
// deltas wrote it: its data (AppendWholeText) and "<at>,<schema>,<schemaMin>".
func HistDataField(ver int64) string { return histField0(histTextData, ver) }

// HistMetaField: see HistDataField.
func HistMetaField(ver int64) string { return histField0(histTextMeta, ver) }

// AppendWholeText appends data as a FormWholeText version's d<ver> value.
func AppendWholeText(dst []byte, enc *zstd.Encoder, data []byte) []byte {
	return enc.EncodeAll(data, append(dst, histTextTag))
}

// appendDelta appends to dst target written as a delta against base, its
// checksum last (the previous layout's deltas).
func appendDelta(dst, base, target []byte) []byte {
	dst = appendOps(dst, base, target)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(target, crcTable))
}

// parseLegacy reads a version of an earlier layout: its metadata and the
// fields of its data.
func (s *Stored) parseLegacy(byLetter map[byte][]listedField) {
	s.Legacy = true
	fs := byLetter[s.layout]
	if s.layout == histTextData {
		fs = append(slices.Clone(fs), byLetter[histTextMeta]...)
	}
	for _, f := range fs {
		s.fields = append(s.fields, f.name)
		s.Bytes += max(f.size, 0)
	}
	slices.SortFunc(s.fields, func(a, b string) int { // the metadata, then the chunks in order
		la, _, ca, _ := histField(a)
		lb, _, cb, _ := histField(b)
		return cmp.Or(cmp.Compare(lb, la), cmp.Compare(ca, cb)) // 't' before 'd'
	})
	if err := chunksInOrder(s.fields, s.layout); err != nil {
		s.Err = err
		return
	}
	var meta *string
	switch s.layout {
	case histWhole:
		s.Form = FormWhole
		if f, ok := chunk0(fs); ok {
			meta = f.head
		}
	case histDelta:
		s.Form = FormDelta
		if f, ok := chunk0(fs); ok {
			meta = f.head
			if meta == nil {
				s.Err = errLegacyUnlisted // a long value: its metadata is read when needed
				return
			}
		}
	case histTextData:
		s.Form = FormWholeText
		meta = nil
		for _, f := range byLetter[histTextMeta] {
			if _, _, c, _ := histField(f.name); c == 0 {
				meta = f.head
			}
		}
	}
	if meta == nil {
		s.Err = errors.New("its metadata field is missing")
		return
	}
	s.meta = *meta
	s.Err = s.readLegacyMeta()
}

// chunksInOrder checks that an earlier layout's fields (sorted) hold every
// chunk of its value: f<ver> then f<ver>.1 ..., v<ver> then v<ver>.1 ...,
// t<ver> and d<ver>.
func chunksInOrder(fields []string, layout byte) error {
	want := 0
	for _, name := range fields {
		letter, _, c, _ := histField(name)
		if letter == histTextMeta || letter == histTextData {
			if c != 0 {
				return fmt.Errorf("its field %s is not one a build wrote", name)
			}
			continue
		}
		if c != want {
			return fmt.Errorf("its chunk %d is missing", want)
		}
		want++
	}
	if layout == histWhole && want < 2 || layout == histDelta && want < 1 {
		return fmt.Errorf("its chunk %d is missing", want)
	}
	return nil
}

// errLegacyUnlisted: an earlier layout's delta too long for the listing
// to read its metadata.
var errLegacyUnlisted = errors.New("its metadata was not listed")

// readLegacyMeta parses an earlier layout's metadata (s.meta) strictly.
func (s *Stored) readLegacyMeta() error {
	if s.layout == histDelta {
		var v [3]uint64
		b, n := []byte(s.meta), 0
		for i := range v {
			x, m := binary.Uvarint(b[n:])
			if m <= 0 || (i > 0 && x > 1<<31) || x > 1<<53 {
				return errors.New("its metadata does not decode")
			}
			v[i], n = x, n+m
		}
		s.At, s.Schema, s.SchemaMin = time.UnixMilli(int64(v[0])), int(v[1]), int(v[2])
	} else {
		parts := strings.Split(s.meta, ",")
		at, err1 := strictUint(parts[0], 1<<53)
		if len(parts) != 3 || err1 != nil {
			return fmt.Errorf("its metadata %q is not <at>,<schema>,<schemaMin>", s.meta)
		}
		schema, err2 := strictUint(parts[1], 1<<31)
		schemaMin, err3 := strictUint(parts[2], 1<<31)
		if err2 != nil || err3 != nil {
			return fmt.Errorf("its metadata %q is not <at>,<schema>,<schemaMin>", s.meta)
		}
		s.At, s.Schema, s.SchemaMin = time.UnixMilli(int64(at)), int(schema), int(schemaMin)
	}
	if s.SchemaMin > s.Schema {
		return fmt.Errorf("its min-reader schema %d is above its schema %d", s.SchemaMin, s.Schema)
	}
	return nil
}

// strictUint parses a decimal integer as this library writes one: digits,
// no sign, no leading zero, at most limit.
func strictUint(s string, limit uint64) (uint64, error) {
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil || x > limit || s != strconv.FormatUint(x, 10) {
		return 0, fmt.Errorf("%q is not a decimal integer", s)
	}
	return x, nil
}

// resolveLegacy sets the base of each earlier layout's delta: the next
// newer kept version, whatever its layout (the version its writer kept
// next, which this build may have rewritten since in its own layout).
func (h *History) resolveLegacy() {
	vs := h.Versions
	for i := range vs {
		s := &vs[i]
		if !s.Legacy {
			continue
		}
		if s.Form == FormDelta && i+1 < len(vs) {
			s.Base = vs[i+1].Ver
		}
	}
}
