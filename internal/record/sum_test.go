package record

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/ckernel/playerdata/internal/damage"
)

// storedCase is a record as this build writes it: format 2, its checksum.
func storedCase() StoredRecord {
	data := []byte("\x83\xa5Coins\xcd\x01\x00\xa5Items\x81\xa5sword\x01\xa4Name\xa4hero")
	uids, meta := []byte("\x92\x01\x02"), []byte("\x81\xa1k\xa1v")
	return StoredRecord{Format: "2", Ver: "12", At: "1765000000123", Schema: "5", SchemaMin: "3", Data: data,
		UserIDs: uids, Meta: meta, Sum: SumField(12, 1765000000123, RecordSum(data, 5, 3, uids, meta))}
}

// storedFields are the record's fields an edit can reach, by name.
func storedFields(r *StoredRecord) map[string]*[]byte {
	b := func(s *string) *[]byte { v := []byte(*s); return &v }
	return map[string]*[]byte{"fmt": b(&r.Format), "sum": b(&r.Sum), "ver": b(&r.Ver), "at": b(&r.At),
		"schema": b(&r.Schema), "schema.min": b(&r.SchemaMin), "data": &r.Data, "uids": &r.UserIDs, "meta": &r.Meta}
}

// withField is r with field name set to v.
func withField(r StoredRecord, name string, v []byte) StoredRecord {
	switch name {
	case "fmt":
		r.Format = string(v)
	case "sum":
		r.Sum = string(v)
	case "ver":
		r.Ver = string(v)
	case "at":
		r.At = string(v)
	case "schema":
		r.Schema = string(v)
	case "schema.min":
		r.SchemaMin = string(v)
	case "data":
		r.Data = v
	case "uids":
		r.UserIDs = v
	case "meta":
		r.Meta = v
	}
	return r
}

// readsAs says whether got reads as want: the values a load takes from it.
func readsAs(got, want StoredRecord) bool {
	n := func(s string) int64 { x, _ := strconv.ParseInt(orZero(s), 10, 64); return x }
	return bytes.Equal(got.Data, want.Data) && bytes.Equal(got.UserIDs, want.UserIDs) && bytes.Equal(got.Meta, want.Meta) &&
		n(got.Schema) == n(want.Schema) && n(got.SchemaMin) == n(want.SchemaMin) && n(got.Ver) == n(want.Ver) &&
		n(got.At) == n(want.At)
}

// checkStoredEdit fails unless r (the case, edited) is refused or reads as
// the case.
func checkStoredEdit(t *testing.T, r StoredRecord, what string) {
	t.Helper()
	if cf := r.Check(); cf == nil && !readsAs(r, storedCase()) {
		t.Fatalf("%s: accepted, and reads as another record: %+v", what, r)
	}
}

// The attack of issue 32 on a record's fields: every byte of every field
// the load reads flipped (each bit, all bits), each field cut short at
// every byte, extended, and deleted. Each is refused (naming a field) or
// reads as written.
func TestStoredRecordEveryByte(t *testing.T) {
	c := storedCase()
	if cf := c.Check(); cf != nil {
		t.Fatalf("the record as written is refused: %+v", cf)
	}
	for name, v := range storedFields(&c) {
		damage.Every(*v, func(e []byte, what string) {
			checkStoredEdit(t, withField(c, name, bytes.Clone(e)), name+" "+what)
		})
		checkStoredEdit(t, withField(c, name, nil), name+" deleted")
	}
	// A record of format 1 (an earlier build's) has no checksum: unchecked.
	legacy := c
	legacy.Format, legacy.Sum = "1", ""
	if cf := legacy.Check(); cf != nil {
		t.Fatalf("a record of format 1 is refused: %+v", cf)
	}
}

// FuzzStoredRecord edits one field of a record once (flips, sets, cuts or
// extends it at any byte): the record is refused, or reads as written.
func FuzzStoredRecord(f *testing.F) {
	for field := range uint8(9) {
		f.Add(field, uint8(0), uint16(0), byte(1))
		f.Add(field, uint8(2), uint16(3), byte(0))
		f.Add(field, uint8(3), uint16(1), byte('9'))
	}
	names := []string{"fmt", "sum", "ver", "at", "schema", "schema.min", "data", "uids", "meta"}
	f.Fuzz(func(t *testing.T, field, op uint8, pos uint16, b byte) {
		c := storedCase()
		name := names[int(field)%len(names)]
		v := *storedFields(&c)[name]
		checkStoredEdit(t, withField(c, name, damage.Once(v, op, int(pos), b)), name+" edited")
	})
}
