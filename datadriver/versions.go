package datadriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ckernel/playerdata/internal/datacodec"
	"github.com/ckernel/playerdata/internal/record"
)

// Version is one kept version of a record.
type Version struct {
	Ver     int64     // the record version (grows by one with every data write)
	At      time.Time // when it was written (Redis clock)
	Current bool      // the record's current data
	// Err is set on a kept version whose metadata is damaged: it matches
	// ErrCorruptRecord (or ErrSchemaTooNew for a newer build's layout), At
	// is zero, and the version cannot be read or restored.
	Err error
}

// version is a Version and the schema version of its data.
type version struct {
	Version
	schema int // the schema version its data was written at
}

// Versions lists the kept versions of key, newest first: the current data
// and the versions the history keeps (at most History and HistoryBytes;
// see HistoryEvery). A key never saved has none.
func (d *Driver[T]) Versions(ctx context.Context, key string) ([]Version, error) {
	vs, _, err := d.versions(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make([]Version, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out, nil
}

// versions lists the kept versions of key with their schema versions,
// newest first, and the history's listing they come from.
func (d *Driver[T]) versions(ctx context.Context, key string) ([]version, *record.History, error) {
	if err := validKey(key); err != nil {
		return nil, nil, fmt.Errorf("versions: %w", err)
	}
	res, err := record.Versions(ctx, d.node.rdb, d.recordKey(key))
	if err != nil {
		return nil, nil, fmt.Errorf("versions %q: %w", key, err)
	}
	var out []version
	if res.HasData {
		v := version{Version: Version{Ver: res.Ver, At: res.At, Current: true}}
		if cf := res.Current; cf != nil {
			v.At, v.Err = time.Time{}, &CorruptRecordError{Key: key, Path: cf.Field, Err: errors.New(cf.Why)}
		}
		out = append(out, v)
	}
	for _, k := range res.Kept {
		if k.Ver >= res.Ver {
			continue
		}
		v := version{Version: Version{Ver: k.Ver, At: k.At}, schema: k.Schema}
		if k.Err != nil {
			v.At, v.Err = time.Time{}, versionErr(key, k.Ver, k.Err)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b version) int { return cmp.Compare(b.Ver, a.Ver) })
	return out, &res.History, nil
}

// versionErr is the error of kept version ver of key that does not read:
// ErrSchemaTooNew for a newer build's layout, else a *CorruptRecordError
// naming the version.
func versionErr(key string, ver int64, err error) error {
	if errors.Is(err, record.ErrLayoutTooNew) {
		return fmt.Errorf("version %d of %q: %w: %w", ver, key, ErrSchemaTooNew, err)
	}
	needs := ver
	var ve *record.VersionError
	if errors.As(err, &ve) && ve.Needs != 0 {
		needs = ve.Needs
	}
	return &CorruptRecordError{Key: key, Path: fmt.Sprintf("history version %d", needs), Err: err}
}

// versionAt returns the newest of vs (newest first) written at or before
// t, or ErrNoVersion. A damaged version that may be that one (it lies
// between the newest at or before t and the next newer one) is refused
// with its error: its time is unknown.
func versionAt(key string, vs []version, t time.Time) (version, error) {
	var damaged *version
	for i := range vs {
		v := &vs[i]
		switch {
		case v.Err != nil:
			if damaged == nil {
				damaged = v
			}
		case v.At.After(t):
			damaged = nil // a damaged version newer than this one is newer than t
		case damaged != nil:
			return version{}, fmt.Errorf("%q at %s: %w", key, t.Format(time.RFC3339), damaged.Err)
		default:
			return *v, nil
		}
	}
	if damaged != nil {
		return version{}, fmt.Errorf("%q at %s: %w", key, t.Format(time.RFC3339), damaged.Err)
	}
	return version{}, fmt.Errorf("%q at %s: %w", key, t.Format(time.RFC3339), ErrNoVersion)
}

// readVersion reads and decodes the data of v (a kept one, not the current
// one) from the history h listed it, with what T does not know of it.
func (d *Driver[T]) readVersion(ctx context.Context, key string, h *record.History, v version) (T, *datacodec.Unknown, error) {
	var zero T
	raw, err := h.Read(ctx, d.node.rdb, d.recordKey(key), v.Ver, d.zdec)
	var ve *record.VersionError
	switch {
	case errors.As(err, &ve):
		return zero, nil, versionErr(key, v.Ver, err)
	case err != nil:
		return zero, nil, fmt.Errorf("read version %d of %q: %w", v.Ver, key, err)
	case raw == nil:
		return zero, nil, fmt.Errorf("read version %d of %q: %w (no longer kept)", v.Ver, key, ErrNoVersion)
	}
	data, unknown, err := d.codec.Decode(raw, v.schema)
	if err != nil {
		return zero, nil, decodeErr(key, fmt.Errorf("version %d: %w", v.Ver, err))
	}
	return data, unknown, nil
}

// ReadVersion reads, without the lock, the newest version of key's data kept
// at or before t, as stored in Redis (a live session may hold newer data).
// It answers ErrNoVersion when none is that old, ErrCorruptRecord or
// ErrMigration when it does not decode.
func (d *Driver[T]) ReadVersion(ctx context.Context, key string, t time.Time) (T, error) {
	var zero T
	vs, h, err := d.versions(ctx, key)
	if err != nil {
		return zero, err
	}
	v, err := versionAt(key, vs, t)
	if err != nil {
		return zero, fmt.Errorf("read version: %w", err)
	}
	if v.Err != nil {
		return zero, v.Err
	}
	if !v.Current {
		data, _, err := d.readVersion(ctx, key, h, v)
		return data, err
	}
	f, err := d.node.rdb.HMGet(ctx, d.recordKey(key), record.FieldData, record.FieldSchema, record.FieldSchemaMin,
		record.FieldUserIDs, record.FieldMeta, record.FieldVer, record.FieldAt, record.FieldFormat, record.FieldSum).Result()
	if err != nil {
		return zero, fmt.Errorf("read version %q: %w", key, err)
	}
	stored := record.StoredRecord{Data: []byte(fieldString(f[0])), Schema: fieldString(f[1]), SchemaMin: fieldString(f[2]),
		UserIDs: []byte(fieldString(f[3])), Meta: []byte(fieldString(f[4])), Ver: fieldString(f[5]), At: fieldString(f[6]),
		Format: fieldString(f[7]), Sum: fieldString(f[8])}
	if err := checkStored(key, stored); err != nil {
		return zero, err
	}
	schema := 0
	_, _ = fmt.Sscan(stored.Schema, &schema)
	data, _, err := d.codec.Decode(stored.Data, schema)
	if err != nil {
		return zero, decodeErr(key, err)
	}
	return data, nil
}

// RestoreAt loads key under its lock (with Load's waits and errors) and makes
// the newest version kept at or before t the current data, written as a new
// version; the data it replaces is kept too, so a restore can be undone
// (docs/history.md). It returns the live profile, which the caller releases.
// It answers ErrNoVersion when no kept version is that old and
// ErrCorruptRecord when that version does not decode; a record whose current
// data does not decode is repaired this way.
func (d *Driver[T]) RestoreAt(ctx context.Context, key string, t time.Time, opts LoadOptions) (*Profile[T], error) {
	w := d.loadWait(opts)
	p, err := d.load(ctx, key, loadSpec{localWait: w, remoteWait: w, mode: loadRestore})
	if err != nil {
		return nil, err
	}
	if err := d.restore(ctx, p, t); err != nil {
		if rerr := p.Release(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return p, nil
}

func (d *Driver[T]) restore(ctx context.Context, p *Profile[T], t time.Time) error {
	vs, h, err := d.versions(ctx, p.key)
	if err != nil {
		return err
	}
	target, err := versionAt(p.key, vs, t)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if target.Current {
		return p.do(ctx, func(context.Context) error {
			if p.w.has(flagCorrupt) {
				return &CorruptRecordError{Key: p.key, Err: fmt.Errorf("the data as of %s is the current data, which does not decode",
					t.Format(time.RFC3339))}
			}
			return nil // the data as of t is the current data
		})
	}
	data, unknown, err := d.readVersion(ctx, p.key, h, target)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	err = p.do(ctx, func(ctx context.Context) error {
		p.dataMu.Lock()
		was, wasUnknown := p.data, p.extras().unknownData()
		p.data = data
		p.setUnknown(unknown)
		p.dataMu.Unlock()
		// The data is at the kept version's schema (or this driver's, which
		// migrated it): the save stamps the larger of the two, never the
		// replaced data's, so a newer server migrates it again on load. The
		// replaced data's min-reader stays: it never lets an older server in.
		schema, corrupt, keep := p.w.schema, p.w.has(flagCorrupt), p.w.has(flagKeepNext)
		p.w.schema = int32(target.schema)
		p.w.set(flagCorrupt, false)
		p.w.set(flagKeepNext, true) // the data before the restore is kept (even corrupt: nothing stored is lost)
		err := p.write(ctx, writeSave)
		if err != nil {
			// A restore that failed puts nothing back: the profile holds the
			// data it loaded again, so that the release (now, or retried
			// later) does not write the version after all. (A write whose
			// answer was lost may have landed: the release writes the loaded
			// data over it.)
			p.dataMu.Lock()
			p.data = was
			p.setUnknown(wasUnknown)
			p.dataMu.Unlock()
			p.w.schema = schema
			p.w.set(flagCorrupt, corrupt)
			p.w.set(flagKeepNext, keep)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("restore %q: %w", p.key, err)
	}
	d.log.Info("restored a version", "key", p.key, "ver", target.Ver, "at", target.At)
	return nil
}
