package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ckernel/playerdata/internal/record"
)

// The checks of a record's stored bytes, as a load makes them.

// checkBlobs checks that the record's data, user ids and metadata decode as
// msgpack and its format is one this build reads, as a load would, filling
// rep's DataBytes, Data (when withData), DataNote and Corrupt. vals are the
// HMGET answers of data, uids and meta.
func checkBlobs(rep *inspectReport, vals []any, withData bool) {
	if f, err := strconv.Atoi(rep.Format); err == nil && f > record.Format {
		rep.Corrupt = &corruptReport{Field: record.FieldFormat,
			Reason: fmt.Sprintf("its format %d is newer than this build's %d: servers of this build refuse it", f, record.Format)}
	}
	names := []string{record.FieldData, record.FieldUserIDs, record.FieldMeta}
	for i, name := range names {
		raw, _ := vals[i].(string)
		if name == record.FieldData {
			rep.DataBytes = int64(len(raw))
		}
		if raw == "" {
			continue // absent: a new profile's defaults, or no ids or metadata
		}
		js, n, err := msgpackJSON([]byte(raw))
		var de *dataError
		if errors.As(err, &de) {
			if rep.Corrupt == nil {
				rep.Corrupt = &corruptReport{Field: name, Offset: &de.Offset, Reason: de.Reason}
			}
			continue
		}
		if name != record.FieldData {
			continue
		}
		if withData {
			rep.Data = js
		}
		if n < len(raw) { // the servers' codec refuses it (datacodec.ErrMalformed)
			rep.Data = nil
			if rep.Corrupt == nil {
				rep.Corrupt = &corruptReport{Field: name, Offset: &n,
					Reason: fmt.Sprintf("%d bytes follow the value", len(raw)-n)}
			}
			continue
		}
		var notes []string
		if len(js) > 0 && js[0] != '{' {
			notes = append(notes, "the data is not a map: a profile whose type is a struct does not load from it")
		}
		rep.DataNote = strings.Join(notes, "; ")
	}
}

// checkSum checks the record against its checksum, as a load does, and
// names the damaged field in rep.Corrupt (unless a field is named already).
// v are the record's fields read, blobs the data, user ids and metadata.
func checkSum(rep *inspectReport, v map[string]string, blobs []any) {
	if rep.Corrupt != nil {
		return
	}
	blob := func(i int) []byte { s, _ := blobs[i].(string); return []byte(s) }
	cf := record.StoredRecord{Format: v[record.FieldFormat], Sum: v[record.FieldSum], Ver: v[record.FieldVer],
		At: v[record.FieldAt], Schema: v[record.FieldSchema], SchemaMin: v[record.FieldSchemaMin], Data: blob(0),
		UserIDs: blob(1), Meta: blob(2)}.Check()
	if cf != nil {
		rep.Corrupt = &corruptReport{Field: cf.Field, Reason: cf.Why}
	}
}
