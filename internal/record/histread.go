package record

// Reading kept versions: a version stored whole decompresses; one stored as
// a delta applies to the data of the next newer version, down the chain
// from the nearest whole one above it.

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Data is the data of kept version ver, as it was written; nil when it is
// not kept. An error says why it does not read (a *VersionError).
func (h History) Data(ver int64, dec *zstd.Decoder) ([]byte, error) {
	i := h.index(ver)
	if i < 0 {
		return nil, nil
	}
	j := i
	for j < len(h.Versions) && h.Versions[j].Form == FormDelta {
		j++
	}
	if j == len(h.Versions) {
		return nil, &VersionError{Ver: ver, Err: errors.New("it is a delta and no newer version is stored whole")}
	}
	data, err := h.Versions[j].whole(dec)
	for k := j - 1; k >= i && err == nil; k-- {
		data, err = h.Versions[k].apply(data)
		j = k
	}
	if err != nil {
		return nil, &VersionError{Ver: ver, Needs: h.Versions[j].Ver, Err: err}
	}
	return data, nil
}

// whole decodes a version stored whole.
func (s Stored) whole(dec *zstd.Decoder) ([]byte, error) {
	body := s.body
	if s.bad != nil {
		return nil, s.bad
	}
	if s.Form == FormWholeText {
		if len(body) == 0 || body[0] != histTextTag {
			return nil, errors.New("its data is not of a known format")
		}
		body = body[1:]
	}
	if len(body) == 0 {
		return nil, errors.New("its data is empty")
	}
	data, err := dec.DecodeAll(body, nil)
	if err != nil {
		return nil, fmt.Errorf("its data does not decompress: %w", err)
	}
	return data, nil
}

// apply makes a delta's version out of the data of the version above it.
func (s Stored) apply(base []byte) ([]byte, error) {
	if s.bad != nil {
		return nil, s.bad
	}
	return applyDelta(base, s.body, MaxKeptBytes)
}

// VersionError says why a kept version does not read.
type VersionError struct {
	Ver int64
	// Needs is the version whose damage makes Ver unreadable: Ver itself,
	// or a newer one a chain of deltas leads Ver to (0: the chain leads
	// nowhere).
	Needs int64
	Err   error
}

func (e *VersionError) Error() string {
	switch e.Needs {
	case 0, e.Ver:
		return fmt.Sprintf("version %d: %v", e.Ver, e.Err)
	}
	return fmt.Sprintf("version %d is stored as a delta that needs version %d, which does not read: %v", e.Ver, e.Needs, e.Err)
}

func (e *VersionError) Unwrap() error { return e.Err }

// Health is whether one kept version reads.
type Health struct {
	Stored
	// Err says why it does not read (nil: it does); Needs is then the
	// damaged version it depends on (its own ver: it is damaged itself; 0:
	// no version above it is stored whole).
	Err   error
	Needs int64
}

// Check reads every kept version, newest first, decoding each chain once.
func (h History) Check(dec *zstd.Decoder) []Health {
	out := make([]Health, 0, len(h.Versions))
	var above []byte // the data of the version above, when it reads
	var broken int64 // the damaged version the ones below depend on, while above is nil
	for i := len(h.Versions) - 1; i >= 0; i-- {
		s := h.Versions[i]
		hv := Health{Stored: s}
		var err error
		switch {
		case s.Form != FormDelta:
			above, err = s.whole(dec)
		case above == nil && broken == 0:
			hv.Err = errors.New("it is a delta and no newer version is stored whole")
		case above == nil:
			hv.Err, hv.Needs = fmt.Errorf("it is a delta that needs version %d, which does not read", broken), broken
		default:
			above, err = s.apply(above)
		}
		if err != nil {
			above, broken = nil, s.Ver
			hv.Err, hv.Needs = err, s.Ver
		}
		out = append(out, hv)
	}
	return out
}
