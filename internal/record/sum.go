package record

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ckernel/playerdata/internal/checksum"
)

// A record of format 2 carries its checksum in the field sum:
// "<ver>,<at>,<crc>", written by every write that writes its data or its
// user ids and metadata. crc (8 hex digits) is the CRC-32C of its data,
// schema, schema.min, user ids and metadata (RecordSum), computed by the
// writer, which knows them all; ver and at are copies of the record's ver
// and at, which the script stamps (it cannot compute a CRC; a copy that
// must agree checks them as well). A record of format 1 (written by an
// earlier build) has none and is read unchecked; the first write of this
// build gives it one.

// RecordSum is the checksum of what a record holds beside its lock: its
// data, schema, min-reader, user ids and metadata, each length-prefixed.
func RecordSum(data []byte, schema, schemaMin int, uids, meta []byte) string {
	return RecordSumAfter(DataSum(data), schema, schemaMin, uids, meta)
}

// DataSum is the record checksum run over data, its first part: a holder
// that keeps it instead of the stored data checksums a write that leaves
// the data as stored (RecordSumAfter) without holding the data twice.
func DataSum(data []byte) checksum.Running { return checksum.Running(0).Part(data) }

// RecordSumAfter is RecordSum of the data that data sums, with the rest.
func RecordSumAfter(data checksum.Running, schema, schemaMin int, uids, meta []byte) string {
	return data.Int(int64(schema)).Int(int64(schemaMin)).Part(uids).Part(meta).String()
}

// SumField is the sum field save.lua writes for a record at ver, written
// at at (ms), whose RecordSum is crc.
func SumField(ver, atMS int64, crc string) string {
	return strconv.FormatInt(ver, 10) + "," + strconv.FormatInt(atMS, 10) + "," + crc
}

// StoredRecord is what a record holds beside its lock, as stored: the
// fields its checksum covers or copies.
type StoredRecord struct {
	Format, Sum, Ver, At string
	Schema, SchemaMin    string
	Data, UserIDs, Meta  []byte
}

// Check checks the record against its checksum. nil: it matches, or the
// record has none and may have none (format 1, or no data nor user ids
// yet). Otherwise the field it names is damaged (or the checksum itself).
func (r StoredRecord) Check() *CorruptField {
	if r.Sum == "" {
		if r.Format != "" && r.Format != "1" && (len(r.Data) > 0 || len(r.UserIDs) > 0 || len(r.Meta) > 0) {
			return &CorruptField{Field: FieldSum, Why: "the record's checksum (sum) is missing from a record of format " + r.Format}
		}
		return nil
	}
	parts, cf := r.copies()
	if cf != nil {
		return cf
	}
	schema, err1 := strictUint(orZero(r.Schema), 1<<31)
	schemaMin, err2 := strictUint(orZero(r.SchemaMin), 1<<31)
	switch {
	case err1 != nil:
		return &CorruptField{Field: FieldSchema, Why: "the record's schema is not an integer"}
	case err2 != nil:
		return &CorruptField{Field: FieldSchemaMin, Why: "the record's schema.min is not an integer"}
	}
	if RecordSum(r.Data, int(schema), int(schemaMin), r.UserIDs, r.Meta) != parts[2] {
		return &CorruptField{Field: FieldData, Why: "the record's data, schema, schema.min, user ids or metadata does " +
			"not match its checksum (sum): damaged"}
	}
	return nil
}

// copies checks the sum's form and the ver and at it copies (what a
// listing of the versions checks, without the data): the sum's parts, or
// the field that disagrees.
func (r StoredRecord) copies() ([]string, *CorruptField) {
	parts := strings.Split(r.Sum, ",")
	if len(parts) != 3 || !checksum.Valid(parts[2]) {
		return nil, &CorruptField{Field: FieldSum, Why: fmt.Sprintf("the record's checksum (sum) %q is not <ver>,<at>,<crc>", r.Sum)}
	}
	if parts[0] != r.Ver {
		return nil, &CorruptField{Field: FieldVer, Why: fmt.Sprintf("the record's ver %q disagrees with its checksum, "+
			"which says %q", r.Ver, parts[0])}
	}
	if parts[1] != r.At {
		return nil, &CorruptField{Field: FieldAt, Why: fmt.Sprintf("the record's at %q disagrees with its checksum, "+
			"which says %q", r.At, parts[1])}
	}
	return parts, nil
}

// orZero is s, or "0" when empty (a record written before schemas).
func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
