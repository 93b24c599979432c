package datadriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ckernel/playerdata/internal/record"
)

// Version is one kept version of a record.
type Version struct {
	Ver     int64     // the record version (grows by one with every data write)
	At      time.Time // when it was written (Redis clock)
	Current bool      // the record's current data
}

// Versions lists the kept versions of key, newest first: the current data
// and up to History past versions. A key never saved has none.
func (d *Driver[T]) Versions(ctx context.Context, key string) ([]Version, error) {
	if err := ValidKey(key); err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	res, err := record.Versions(ctx, d.node.rdb, d.recordKey(key), d.cfg.History)
	if err != nil {
		return nil, fmt.Errorf("versions %q: %w", key, err)
	}
	var out []Version
	cur := res.Ver
	if res.HasData {
		out = append(out, Version{Ver: cur, At: res.At, Current: true})
	}
	for _, s := range res.Slots {
		// A slot is kept while it is one of the last History versions.
		if s.Set && s.Ver < cur && s.Ver >= cur-int64(d.cfg.History) {
			out = append(out, Version{Ver: s.Ver, At: s.At})
		}
	}
	slices.SortFunc(out, func(a, b Version) int { return cmp.Compare(b.Ver, a.Ver) })
	return out, nil
}

// RestoreAt loads key under its lock (with Load's waits and errors) and
// puts back the data as it was at t: the newest kept version written at or
// before t becomes the current data, written as a new version, so the
// restore itself can be undone. It returns the live profile, which the
// caller releases. With no kept version that old it answers ErrNoVersion
// and changes nothing; a kept version that does not decode answers
// ErrCorruptRecord. It works whatever the current data is: a record whose
// current data does not decode (ErrCorruptRecord on Load) is repaired by
// restoring an older version; until the restore lands nothing of it is
// written.
func (d *Driver[T]) RestoreAt(ctx context.Context, key string, t time.Time, opts LoadOptions) (*Profile[T], error) {
	w := d.loadWait(opts)
	p, err := d.load(ctx, key, loadSpec{localWait: w, remoteWait: w, restoring: true})
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
	versions, err := d.Versions(ctx, p.key)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(versions, func(v Version) bool { return !v.At.After(t) })
	if i < 0 {
		return fmt.Errorf("restore %q at %s: %w", p.key, t.Format(time.RFC3339), ErrNoVersion)
	}
	target := versions[i]
	p.d.mu.Lock()
	corrupt := p.corrupt
	p.d.mu.Unlock()
	if target.Current {
		if corrupt {
			return &CorruptRecordError{Key: p.key, Err: fmt.Errorf("the data as of %s is the current data, which does not decode",
				t.Format(time.RFC3339))}
		}
		return nil // the data as of t is the current data
	}
	verField, _, dataField := record.SlotFields(target.Ver % int64(d.cfg.History))
	got, err := d.node.rdb.HMGet(ctx, d.recordKey(p.key), verField, dataField).Result()
	if err != nil {
		return fmt.Errorf("restore %q: %w", p.key, err)
	}
	raw := []byte(fieldString(got[1]))
	if fieldString(got[0]) != strconv.FormatInt(target.Ver, 10) || got[1] == nil {
		return fmt.Errorf("restore %q: version %d: %w", p.key, target.Ver, ErrNoVersion)
	}
	// Ring slots hold versions written before schema versions were kept.
	data, unknown, err := d.codec.Decode(raw, 0)
	if err != nil {
		return decodeErr(p.key, fmt.Errorf("version %d: %w", target.Ver, err))
	}
	p.dataMu.Lock()
	p.data, p.unknown = data, unknown
	p.dataMu.Unlock()
	p.d.mu.Lock()
	p.corrupt = false
	p.d.mu.Unlock()
	if err := p.Save(ctx); err != nil {
		return fmt.Errorf("restore %q: %w", p.key, err)
	}
	d.log.Info("restored a version", "key", p.key, "ver", target.Ver, "at", target.At)
	return nil
}
