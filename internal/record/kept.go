package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/klauspost/compress/zstd"
)

// A version kept in the current layout is one value under the field letter
// 'k' (k<ver>, cut into chunks: see keptFields): a header, then a body.
//
//	byte 0    layout: keptLayout; a higher one is a newer build's
//	byte 1    n: the header's length, these two bytes and its checksum included
//	uvarint   at: when the data was written (ms, Redis clock)
//	uvarint   schema, then schemaMin: the data's schema version and min-reader
//	byte      form: keptWhole (the body is the data compressed with zstd) or
//	          keptDelta (the body is copy/insert operations, delta.go)
//	uvarint   base: the version a delta applies to (0 for a whole one)
//	uvarint   prev: the version kept before this one (0: none, or unknown),
//	          so that a version deleted from between two others is missed
//	uvarint   dataLen: the data's length
//	uint32    dataSum: CRC-32C of the data (little-endian, as every uint32 here)
//	uvarint   bodyLen
//	uint32    headSum: CRC-32C of the version number (8 bytes) and bytes 0 .. n-5
//	body      bodyLen bytes
//
// Every byte is checked: the header by headSum, which binds it to its
// version number, so that no damaged time or schema is ever listed; the
// body by dataSum once decoded, which also proves that a delta met the
// base it was made against; the value's length by n + bodyLen. Every
// future layout keeps bytes 0 and 1 and a trailing header checksum, so that
// this build tells a newer build's version (ErrLayoutTooNew) from a damaged
// one.

// keptLayout is the layout this build writes and reads.
const keptLayout = 1

// The forms of a kept value's body.
const (
	keptWhole = 1
	keptDelta = 2
)

// keptMaxHead bounds a header: every field at its longest.
const keptMaxHead = 2 + 3*binary.MaxVarintLen64 + 1 + 4*binary.MaxVarintLen64 + 8

// ErrLayoutTooNew is wrapped by the error of a kept version that a newer
// build wrote in a layout this one does not know: it is refused, never
// misread.
var ErrLayoutTooNew = errors.New("record: a newer build's layout")

// crcTable is CRC-32C, every checksum of the stored structures.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// KeptMeta is what a kept version says of its data.
type KeptMeta struct {
	At                time.Time // when the data was written (Redis clock, ms)
	Schema, SchemaMin int
}

// keptHead is a parsed header.
type keptHead struct {
	KeptMeta
	form    byte
	base    int64
	prev    int64
	dataLen int
	dataSum uint32
	bodyLen int
	n       int // the header's length
}

// appendHead appends the header of version ver.
func appendHead(dst []byte, ver int64, h keptHead) []byte {
	start := len(dst)
	dst = append(dst, keptLayout, 0)
	dst = binary.AppendUvarint(dst, uint64(max(h.At.UnixMilli(), 0)))
	dst = binary.AppendUvarint(dst, uint64(max(h.Schema, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(h.SchemaMin, 0)))
	dst = append(dst, h.form)
	dst = binary.AppendUvarint(dst, uint64(max(h.base, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(h.prev, 0)))
	dst = binary.AppendUvarint(dst, uint64(h.dataLen))
	dst = binary.LittleEndian.AppendUint32(dst, h.dataSum)
	dst = binary.AppendUvarint(dst, uint64(h.bodyLen))
	dst[start+1] = byte(len(dst) - start + 4)
	return binary.LittleEndian.AppendUint32(dst, headSum(ver, dst[start:]))
}

// headSum is the checksum of version ver's header bytes b (its checksum
// excluded).
func headSum(ver int64, b []byte) uint32 {
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], uint64(ver))
	return crc32.Update(crc32.Checksum(v[:], crcTable), crcTable, b)
}

// parseHead reads the header version ver's value b begins with (b may hold
// only its first chunk).
func parseHead(ver int64, b []byte) (keptHead, error) {
	var h keptHead
	if len(b) < 2 || int(b[1]) < 6 || int(b[1]) > min(len(b), keptMaxHead) {
		return h, fmt.Errorf("its header is cut short (%d bytes)", len(b))
	}
	n := int(b[1])
	if binary.LittleEndian.Uint32(b[n-4:n]) != headSum(ver, b[:n-4]) {
		return h, errors.New("its header does not match its checksum (its time, schema or form is damaged)")
	}
	if b[0] != keptLayout {
		return h, fmt.Errorf("%w: layout %d, this build's is %d", ErrLayoutTooNew, b[0], keptLayout)
	}
	h.n = n
	r := headReader{b: b[2 : n-4]}
	at := r.uvarint(1 << 53)
	h.Schema, h.SchemaMin = int(r.uvarint(MaxSchema)), int(r.uvarint(MaxSchema))
	h.form = r.byte()
	h.base = int64(r.uvarint(1 << 62))
	h.prev = int64(r.uvarint(1 << 62))
	h.dataLen = int(r.uvarint(MaxKeptBytes))
	h.dataSum = r.uint32()
	h.bodyLen = int(r.uvarint(1 << 40))
	switch {
	case r.err != nil || len(r.b) != 0:
		return h, errors.New("its header does not decode")
	case h.form != keptWhole && h.form != keptDelta:
		return h, fmt.Errorf("its form %d is not one this build writes", h.form)
	case h.form == keptDelta && h.base <= ver, h.form == keptWhole && h.base != 0:
		return h, fmt.Errorf("its base version %d is not a newer one", h.base)
	case h.prev >= ver:
		return h, fmt.Errorf("its previous version %d is not an older one", h.prev)
	case h.SchemaMin > h.Schema:
		return h, fmt.Errorf("its min-reader schema %d is above its schema %d", h.SchemaMin, h.Schema)
	}
	h.At = time.UnixMilli(int64(at))
	return h, nil
}

// headReader reads a header's fields, remembering the first failure.
type headReader struct {
	b   []byte
	err error
}

func (r *headReader) uvarint(limit uint64) uint64 {
	x, k := binary.Uvarint(r.b)
	if k <= 0 || x > limit {
		r.err, r.b = errors.New("bad varint"), nil
		return 0
	}
	r.b = r.b[k:]
	return x
}

func (r *headReader) byte() byte {
	if len(r.b) < 1 {
		r.err = errors.New("short")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *headReader) uint32() uint32 {
	if len(r.b) < 4 {
		r.err, r.b = errors.New("short"), nil
		return 0
	}
	x := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return x
}

// KeptValue is a version's value in the current layout, split where its
// fields are cut: Head (the header, and the body too when the value is
// short enough to be chunked) and Body (the rest).
type KeptValue struct {
	Head, Body []byte
}

// Len is the value's length.
func (v KeptValue) Len() int { return len(v.Head) + len(v.Body) }

// NewKeptWhole is version ver kept whole: data compressed with enc. prev
// is the version kept before it (0: none, or not known).
func NewKeptWhole(ver, prev int64, meta KeptMeta, data []byte, enc *zstd.Encoder) KeptValue {
	return keptWholeOf(ver, prev, meta, data, enc.EncodeAll(data, make([]byte, 0, len(data)/2+64)))
}

// keptWholeOf is version ver kept whole, body being data compressed.
func keptWholeOf(ver, prev int64, meta KeptMeta, data, body []byte) KeptValue {
	h := keptHead{KeptMeta: meta, form: keptWhole, prev: prev, dataLen: len(data), dataSum: crc32.Checksum(data, crcTable),
		bodyLen: len(body)}
	return joinKept(appendHead(nil, ver, h), body)
}

// keptDeltaOf is version ver (data) kept as a delta against version base
// (baseData).
func keptDeltaOf(ver, prev int64, meta KeptMeta, data []byte, base int64, baseData []byte) KeptValue {
	ops := appendOps(nil, baseData, data)
	h := keptHead{KeptMeta: meta, form: keptDelta, base: base, prev: prev, dataLen: len(data),
		dataSum: crc32.Checksum(data, crcTable), bodyLen: len(ops)}
	return joinKept(appendHead(nil, ver, h), ops)
}

// joinKept puts a short value in one piece (its fields are chunks of it).
func joinKept(head, body []byte) KeptValue {
	if len(head)+len(body) <= HistChunkedMax {
		return KeptValue{Head: append(head, body...)}
	}
	return KeptValue{Head: head, Body: body}
}

// keptFields appends to dst the field/value pairs that hold version ver's
// value v: a value up to HistChunkedMax is cut in chunks of HistChunk
// bytes (k<ver>, k<ver>.1, ...); a longer one is its header in k<ver> and
// its body in k<ver>.1.
func keptFields(dst []any, ver int64, v KeptValue) []any {
	name := histField0(histKept, ver)
	if len(v.Body) > 0 {
		return append(dst, name, v.Head, chunkName(name, 1), v.Body)
	}
	return histChunks(dst, name, 0, v.Head)
}

// keptFieldCount is how many fields hold a value of length n (see
// keptFields).
func keptFieldCount(n int) int {
	if n > HistChunkedMax {
		return 2
	}
	return (n + HistChunk - 1) / HistChunk
}

// decodeKept decodes version ver's value (header h, body) into dst's
// storage: a whole one decompressed, a delta applied to baseData. The data
// must be h.dataLen bytes whose checksum is h.dataSum.
func decodeKept(dst []byte, ver int64, h keptHead, body, baseData []byte, dec *zstd.Decoder) ([]byte, error) {
	if len(body) != h.bodyLen {
		return nil, fmt.Errorf("its body is %d bytes, its header says %d (cut short or extended)", len(body), h.bodyLen)
	}
	var data []byte
	var err error
	if h.form == keptWhole {
		if cap(dst) < h.dataLen {
			dst = make([]byte, 0, h.dataLen)
		}
		data, err = decodeLimited(dec, body, dst[:0], h.dataLen)
	} else {
		data, err = applyOps(dst[:0], baseData, body, h.dataLen)
	}
	if err != nil {
		return nil, err
	}
	if len(data) != h.dataLen || crc32.Checksum(data, crcTable) != h.dataSum {
		if h.form == keptDelta {
			return nil, fmt.Errorf("its data does not match its checksum (damaged, or its base version %d is not the "+
				"one it was made against)", h.base)
		}
		return nil, errors.New("its data does not match its checksum (damaged)")
	}
	return data, nil
}

// decodeLimited decompresses body into dst, refusing more than limit
// bytes: a frame that says it holds another size is refused before it is
// decoded (a damaged size would have the decoder allocate it).
func decodeLimited(dec *zstd.Decoder, body, dst []byte, limit int) ([]byte, error) {
	var fh zstd.Header
	if err := fh.Decode(body); err != nil {
		return nil, fmt.Errorf("its data does not decompress: %w", err)
	}
	if fh.HasFCS && fh.FrameContentSize != uint64(limit) {
		return nil, fmt.Errorf("its data says it decompresses to %d bytes, its header says %d", fh.FrameContentSize, limit)
	}
	out, err := dec.DecodeAll(body, dst)
	if err != nil {
		return nil, fmt.Errorf("its data does not decompress: %w", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("its data decompresses to %d bytes, its header says %d", len(out), limit)
	}
	return out, nil
}
