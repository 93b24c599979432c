package datadriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/tradejournal"
)

// peekFields are the record fields Peek reads, in peekRecord's order.
var peekFields = []string{record.FieldFormat, record.FieldData, record.FieldSchema, record.FieldSchemaMin,
	record.FieldUserIDs, record.FieldMeta, record.FieldVer, record.FieldAt, record.FieldSum, record.FieldTrade,
	record.FieldEpoch, record.FieldInboxSeq}

// peekRecord is what Peek read of a record, in one atomic read.
type peekRecord struct {
	stored record.StoredRecord
	trade  string
	// epoch and inboxSeqField are the record's epoch and inbox.seq as
	// stored (checked as acquire.lua checks them).
	epoch, inboxSeqField string
	// acquired: the record was ever acquired (it has an epoch or data); a
	// record that never was holds at most a Send's inbox.seq.
	acquired bool
	inboxSeq bool // the record counts its messages (inbox.seq is set)
	// histExists and inboxExists say whether the keys beside it exist.
	histExists, inboxExists bool
}

// Peek reads key's current data without its lock, in one atomic read that
// writes nothing: Defaults for a key never saved, stored data with the
// Migrations applied in memory, a committed trade's data from its journal.
// Waiting messages are not applied. It is a snapshot that may be one autosave
// behind the holder: never grant anything against it. It refuses what a join
// refuses (ErrCorruptRecord, ErrMigration, ErrSchemaTooNew, ErrInvalidKey).
func (d *Driver[T]) Peek(ctx context.Context, key string) (T, error) {
	var zero T
	if err := validKey(key); err != nil {
		return zero, fmt.Errorf("peek: %w", err)
	}
	r, err := d.readPeek(ctx, key)
	if err != nil {
		return zero, err
	}
	if err := d.checkPeek(key, r); err != nil {
		return zero, err
	}
	data := r.stored.Data
	schema, _ := strconv.Atoi(r.stored.Schema)
	if r.trade != "" {
		if data, schema, err = d.peekTrade(ctx, key, r.trade, data, schema); err != nil {
			return zero, err
		}
	}
	v, _, err := d.codec.Decode(data, schema)
	if err != nil {
		return zero, decodeErr(key, err)
	}
	return v, nil
}

// readPeek reads key's record and whether the keys beside it exist, in one
// transaction (the record and its keys share a Cluster slot): a record is
// read as one write left it, never half written.
func (d *Driver[T]) readPeek(ctx context.Context, key string) (peekRecord, error) {
	rk := d.recordKey(key)
	var (
		f                 *redis.SliceCmd
		hist, inbox       *redis.IntCmd
		recordKeyNotAHash bool
	)
	_, err := d.node.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		f = p.HMGet(ctx, rk, peekFields...)
		hist = p.Exists(ctx, record.HistoryKey(rk))
		inbox = p.Exists(ctx, record.InboxKey(rk))
		return nil
	})
	if err != nil && f != nil && isWrongType(f.Err()) {
		recordKeyNotAHash, err = true, nil
	}
	if err != nil {
		return peekRecord{}, fmt.Errorf("peek %q: %w", key, err)
	}
	if recordKeyNotAHash {
		return peekRecord{}, d.corruptField(key, record.CorruptField{Field: "(record)", Why: "the record key is not a hash"})
	}
	v := f.Val()
	s := func(i int) string { return fieldString(v[i]) }
	r := peekRecord{
		stored: record.StoredRecord{Format: s(0), Schema: s(2), SchemaMin: s(3), UserIDs: []byte(s(4)),
			Meta: []byte(s(5)), Ver: s(6), At: s(7), Sum: s(8)},
		trade:         s(9),
		epoch:         s(10),
		inboxSeqField: s(11),
		acquired:      v[10] != nil || v[1] != nil,
		inboxSeq:      v[11] != nil,
		histExists:    hist.Val() > 0,
		inboxExists:   inbox.Val() > 0,
	}
	if v[1] != nil {
		r.stored.Data = []byte(s(1)) // nil stays nil: a record without data reads as Defaults
	}
	return r, nil
}

// isWrongType reports whether err is Redis's WRONGTYPE error (the key holds
// another type).
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// checkPeek refuses what acquire.lua and a join's decode refuse: a field
// that is not an integer, a newer format or min-reader, a record gone
// while its history or inbox remains, a checksum that does not match, user
// ids or metadata that do not decode.
func (d *Driver[T]) checkPeek(key string, r peekRecord) error {
	st := r.stored
	if st.Format != "" {
		n, err := strconv.ParseUint(st.Format, 10, 31)
		switch {
		case err != nil:
			return d.corruptField(key, record.CorruptField{Field: record.FieldFormat, Why: "not an integer"})
		case int(n) > record.Format:
			return fmt.Errorf("peek %q: %w: record format %s is newer than this build's %d", key, ErrSchemaTooNew,
				st.Format, record.Format)
		}
	}
	for _, c := range []struct{ name, v string }{{record.FieldSchemaMin, st.SchemaMin}, {record.FieldSchema, st.Schema},
		{record.FieldEpoch, r.epoch}, {record.FieldVer, st.Ver}, {record.FieldAt, st.At},
		{record.FieldInboxSeq, r.inboxSeqField}} {
		if _, err := strconv.ParseUint(c.v, 10, 50); c.v != "" && err != nil {
			return d.corruptField(key, record.CorruptField{Field: c.name, Why: "not an integer"})
		}
	}
	if n, _ := strconv.Atoi(st.SchemaMin); n > d.codec.Version() {
		return fmt.Errorf("peek %q: %w: the record may only be read at schema version %d or later, "+
			"and this driver's is %d (len(Migrations))", key, ErrSchemaTooNew, n, d.codec.Version())
	}
	if !r.acquired && (r.histExists || (!r.inboxSeq && r.inboxExists)) {
		return d.corruptField(key, record.CorruptField{Field: "(record)",
			Why: "missing while its inbox or history remains (deleted or evicted)"})
	}
	if err := checkStored(key, st); err != nil {
		return err
	}
	var (
		uids []string
		meta map[string]string
	)
	if len(st.UserIDs) > 0 {
		if err := msgpack.Unmarshal(st.UserIDs, &uids); err != nil {
			return &CorruptRecordError{Key: key, Path: "(user ids and metadata)", Err: err}
		}
	}
	if len(st.Meta) > 0 {
		if err := msgpack.Unmarshal(st.Meta, &meta); err != nil {
			return &CorruptRecordError{Key: key, Path: "(user ids and metadata)", Err: err}
		}
	}
	return nil
}

// peekTrade is the data of key with trade id pending on its record: the
// trade's image when its journal says it committed, else the stored data
// (a trade not committed changes nothing; one committed and settled since
// the record was read answers its image, which the record then holds).
func (d *Driver[T]) peekTrade(ctx context.Context, key, id string, data []byte, schema int) ([]byte, int, error) {
	e, err := d.node.journal.Read(ctx, id)
	switch {
	case errors.Is(err, tradejournal.ErrNotFound):
		return data, schema, nil
	case errors.Is(err, tradejournal.ErrCorrupt):
		return nil, 0, &CorruptRecordError{Key: key, Err: err}
	case err != nil:
		return nil, 0, fmt.Errorf("peek %q: trade %s: %w", key, id, err)
	}
	if e.State != tradejournal.Committed {
		return data, schema, nil
	}
	i := e.Find(d.cfg.Name, key)
	if i < 0 {
		return nil, 0, &CorruptRecordError{Key: key, Err: fmt.Errorf("marked with trade %s, whose journal does not list it", id)}
	}
	return e.Participants[i].Image, e.Participants[i].Schema, nil
}
