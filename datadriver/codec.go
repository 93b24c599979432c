package datadriver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ckernel/playerdata/internal/datacodec"
)

// Migration is one schema change: Migrations[i] turns stored data of schema
// version i into version i+1 (docs/data-safety.md). Apply changes the data
// in place, as msgpack decodes it (map[string]any, []any, int64, ...); an
// error or a panic refuses the load (ErrMigration). BackwardCompatible says
// the previous version can still read and write the result; otherwise
// older servers refuse what this one writes (ErrSchemaTooNew).
type Migration struct {
	Apply              func(data map[string]any) error
	BackwardCompatible bool
}

// newCodec builds the driver's codec for T from cfg.
func newCodec[T any](cfg Config[T]) (*datacodec.Codec[T], error) {
	ms := make([]datacodec.Migration, len(cfg.Migrations))
	for i, m := range cfg.Migrations {
		if m.Apply == nil {
			return nil, fmt.Errorf("%w: Migrations[%d] has no Apply", ErrInvalidConfig, i)
		}
		ms[i] = datacodec.Migration{Apply: m.Apply, BackwardCompatible: m.BackwardCompatible}
	}
	c, err := datacodec.New(cfg.Defaults, datacodec.Options{TagName: cfg.TagName, Migrations: ms})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if lossy := c.LossyFields(); len(lossy) > 0 && !cfg.AllowLossyFields {
		return nil, lossyErr(cfg.Name, lossy)
	}
	return c, nil
}

// lossyErr refuses a profile type whose fields do not round-trip, naming
// each of them (up to a screenful).
func lossyErr(driver string, lossy []datacodec.LossyField) error {
	const show = 8
	var b strings.Builder
	for i, f := range lossy[:min(len(lossy), show)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	if len(lossy) > show {
		fmt.Fprintf(&b, "; and %d more", len(lossy)-show)
	}
	return fmt.Errorf("%w: driver %s: the profile type has fields that do not round-trip through storage: %s "+
		`(tag a field msgpack:"-" to keep it out of storage, or set Config.AllowLossyFields)`, ErrInvalidConfig, driver, b.String())
}

// decodeErr turns the codec's decode error for key into ours: a failed
// migration (*MigrationError), or a corrupt record (*CorruptRecordError,
// naming the field path when the codec knows it).
func decodeErr(key string, err error) error {
	var me *datacodec.MigrationError
	if errors.As(err, &me) {
		return &MigrationError{Key: key, Index: me.Index, Err: me.Err}
	}
	cerr := &CorruptRecordError{Key: key, Err: err}
	var fe *datacodec.FieldError
	if errors.As(err, &fe) {
		cerr.Path = fe.Path
	}
	return cerr
}
