package datacodec

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"

	"github.com/ckernel/playerdata/internal/msgpackwire"
	"github.com/vmihailenco/msgpack/v5"
)

// Options configures a Codec.
type Options struct {
	// TagName selects the struct tags that name fields, as msgpack v5's
	// SetCustomStructTag does: "msgpack" uses `msgpack:` tags and Go field
	// names; any other name (usually "json") is read where a field has no
	// `msgpack:` tag, which still wins. Changing it renames stored fields:
	// records written under the old names need a migration that renames
	// them.
	// default: "msgpack"
	TagName string

	// Migrations upgrade stored data, in order: Migrations[i] turns data
	// of schema version i into version i+1, so the codec's version is
	// len(Migrations). Append only; never edit or reorder a released one.
	// default: none (version 0)
	Migrations []Migration
}

// Migration is one schema change.
type Migration struct {
	// Apply changes the stored data in place. It sees the record as
	// msgpack decodes it into plain Go values: map[string]any at the top
	// and for nested maps with string keys (map[any]any for others), []any,
	// int64 (uint64 above math.MaxInt64), float64, string, []byte, bool,
	// nil, time.Time, and msgpack.RawMessage for other extensions. Keys
	// are the stored names (see Options.TagName). It may put any value
	// msgpack can encode. An error or a panic stops the Decode.
	Apply func(data map[string]any) error

	// BackwardCompatible says a server of the previous version can still
	// read and write data of this version: it added fields (the older
	// server keeps them as unknown fields) or changed values the older
	// server reads just as well. A rename, a removal of a field the older
	// server still uses, or a change of a field's type is not: MinReader
	// rises past such a migration and older servers refuse the record.
	BackwardCompatible bool
}

// Codec encodes and decodes values of T, keeping what T does not know,
// filling what the stored data lacks from the defaults, and upgrading
// older data through migrations. It is safe for concurrent use.
type Codec[T any] struct {
	*core
	root       *plan
	defaults   T
	migrations []Migration
	minReader  int
}

// core is what does not depend on T: the plans and the scratch states.
type core struct {
	tag   string
	mu    sync.Mutex // held while building plans
	plans sync.Map   // reflect.Type -> *plan, complete plans only
	ids   int        // plans made so far; guarded by mu
	pool  sync.Pool  // *state
}

// state is the scratch of one Encode, Decode or Clone.
type state struct {
	c     *core
	buf   []byte
	spans []span
	tmp   []byte
	temps [][]reflect.Value // free scratch values, by plan id
	depth int
	loose int // inside an interface: see encodeContainer
	r     msgpackwire.Reader
	me    *msgpack.Encoder // custom values, written into buf
	md    *msgpack.Decoder // custom values and any, read from br
	br    bytes.Reader
}

// New returns a codec for T. defaults is copied (deeply): it is the value
// of a new record and the source of every field a stored record lacks.
// It fails with ErrInvalidOptions when opts are invalid or T has a field
// msgpack cannot encode.
func New[T any](defaults T, opts Options) (*Codec[T], error) {
	tag := opts.TagName
	if tag == "msgpack" {
		tag = ""
	}
	for _, r := range tag {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return nil, fmt.Errorf("%w: TagName %q is not a struct tag key", ErrInvalidOptions, opts.TagName)
		}
	}
	c := &Codec[T]{core: &core{tag: tag}, migrations: append([]Migration(nil), opts.Migrations...)}
	for i, m := range c.migrations {
		if m.Apply == nil {
			return nil, fmt.Errorf("%w: Migrations[%d] has no Apply", ErrInvalidOptions, i)
		}
		if !m.BackwardCompatible {
			c.minReader = i + 1
		}
	}
	c.pool.New = func() any { return &state{c: c.core} }
	var err error
	if c.root, err = c.planFor(reflect.TypeFor[T]()); err != nil {
		return nil, err
	}
	if c.defaults, err = c.Clone(&defaults); err != nil {
		return nil, fmt.Errorf("%w: Defaults: %w", ErrInvalidOptions, err)
	}
	return c, nil
}

// Version is the schema version this codec writes: len(Options.Migrations).
func (c *Codec[T]) Version() int { return len(c.migrations) }

// MinReader is the lowest schema version that can still read what this
// codec writes: the version after its last migration that is not
// backward compatible, 0 if there is none. Store it with the record; a
// server whose Version is below a record's MinReader must refuse it.
func (c *Codec[T]) MinReader() int { return c.minReader }

// WriteVersion returns the schema version and min-reader to store with
// data this codec encoded from a record stored with (version, minReader),
// (0, 0) for a new record: the larger of each. An older server that saves
// a newer record wrote it back with the newer fields it kept, so the data
// is still of the newer version; stamping it older would make the newer
// servers run migrations over it again.
func (c *Codec[T]) WriteVersion(version, minReader int) (int, int) {
	return max(version, c.Version()), max(minReader, c.minReader)
}

// Decode returns the value in stored, which was written at schema version
// from, and what T does not know of it (nil when nothing).
//
// A nil stored is a new record: a deep copy of the defaults. Otherwise the
// migrations from..Version()-1 run over the data first (none when from is
// Version() or above: whether this server may read a newer record is the
// caller's check, against the record's MinReader). The data is then
// decoded over the defaults: see the package doc.
//
// Errors: ErrInvalidVersion when from < 0; a *MigrationError when a
// migration fails; a *FieldError (matching ErrMalformed or
// ErrTypeMismatch) when the data does not decode, naming where.
func (c *Codec[T]) Decode(stored []byte, from int) (T, *Unknown, error) {
	var v T
	if from < 0 {
		return v, nil, fmt.Errorf("%w: %d", ErrInvalidVersion, from)
	}
	if stored == nil {
		v, err := c.Clone(&c.defaults)
		return v, nil, err
	}
	s := c.get()
	defer c.put(s)
	data := stored
	if from < len(c.migrations) {
		var err error
		if data, err = c.migrate(s, stored, from, c.migrations); err != nil {
			return v, nil, err
		}
	}
	s.r = msgpackwire.Reader{B: data}
	root, err := s.decode(c.root, reflect.ValueOf(&v).Elem(), reflect.ValueOf(&c.defaults).Elem())
	if err == nil && s.r.Off != len(data) {
		err = fmt.Errorf("%w: %d bytes after the value", ErrMalformed, len(data)-s.r.Off)
	}
	s.r = msgpackwire.Reader{}
	if err != nil {
		var zero T
		return zero, nil, fieldError(err)
	}
	if root == nil {
		return v, nil, nil
	}
	return v, &Unknown{root: root, plan: c.root}, nil
}

// Encode returns v in msgpack, with unk (what Decode returned with v, or
// nil) written back where it was. The bytes are deterministic: the same
// value and unknown fields always give the same bytes (map entries sorted
// by key at every depth, struct fields in declaration order, unknown
// fields after the known ones), so decoding and encoding again what this
// codec wrote gives the same bytes, and comparing bytes tells whether the
// data changed. Apart from the order of map entries (and integers inside
// interface values), they are the bytes msgpack.Marshal writes.
//
// Errors: ErrUnknownMismatch when unk came from another codec, ErrNotATree
// for a cycle, ErrNilValue; an error of a type's own msgpack encoder.
func (c *Codec[T]) Encode(v *T, unk *Unknown) ([]byte, error) {
	if v == nil {
		return nil, ErrNilValue
	}
	var root *node
	if unk != nil {
		if unk.plan != c.root {
			return nil, ErrUnknownMismatch
		}
		root = unk.root
	}
	s := c.get()
	defer c.put(s)
	if err := s.encode(c.root, reflect.ValueOf(v).Elem(), root); err != nil {
		return nil, fmt.Errorf("datacodec: encode: %w", err)
	}
	return bytes.Clone(s.buf), nil
}

// Clone returns a deep copy of *v: every field the codec encodes, copied
// (strings shared, being immutable); fields it does not encode
// (unexported, `msgpack:"-"`) are zero, as after an Encode and a Decode.
// It shares no memory with *v, so either may change afterwards. A value
// that holds the same map or pointer twice gets two copies, and a cycle
// fails with ErrNotATree.
func (c *Codec[T]) Clone(v *T) (T, error) {
	if v == nil {
		var zero T
		return zero, ErrNilValue
	}
	if c.root.pure {
		return *v, nil
	}
	var out T
	s := c.get()
	defer c.put(s)
	err := s.clone(c.root, reflect.ValueOf(&out).Elem(), reflect.ValueOf(v).Elem())
	return out, err
}

func (c *core) get() *state {
	s := c.pool.Get().(*state)
	s.buf, s.spans, s.depth, s.loose = s.buf[:0], s.spans[:0], 0, 0
	return s
}

func (c *core) put(s *state) {
	if cap(s.buf) > 1<<20 || cap(s.tmp) > 1<<20 {
		s.buf, s.tmp = nil, nil // do not keep a huge record's buffers
	}
	c.pool.Put(s)
}

// planFor returns T's plan, building (and publishing) plans for t and the
// types it reaches on first use.
func (c *core) planFor(t reflect.Type) (*plan, error) {
	if p, ok := c.plans.Load(t); ok {
		return p.(*plan), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := &planner{
		tag: c.tag,
		have: func(t reflect.Type) (*plan, bool) {
			p, ok := c.plans.Load(t)
			if !ok {
				return nil, false
			}
			return p.(*plan), true
		},
		nextID: func() int { c.ids++; return c.ids - 1 },
		made:   map[reflect.Type]*plan{},
		active: map[reflect.Type]bool{},
	}
	p, err := pl.get(t, t.String())
	if err != nil {
		return nil, err
	}
	settle(pl.order)
	for _, q := range pl.order {
		c.plans.Store(q.typ, q)
	}
	return p, nil
}
