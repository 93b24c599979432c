package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/klauspost/compress/zstd"
)

// The layouts earlier builds wrote, which this one reads (history.go):
// written here only for tests, and for the bench's figures beside them.

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
