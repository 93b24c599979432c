package datacodec

import (
	"bytes"
	"slices"

	"github.com/ckernel/playerdata/internal/msgpackwire"
)

// checkNesting refuses a (whole) value nested deeper than limit.
func checkNesting(b []byte, limit int) error {
	r := msgpackwire.Reader{B: b}
	var stack []int // values left to read at each open level
	for pending := 1; ; {
		for pending == 0 {
			if len(stack) == 0 {
				return nil
			}
			pending, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
		pending--
		c, err := r.Code()
		if err != nil {
			return err
		}
		if !msgpackwire.IsMap(c) && !msgpackwire.IsArray(c) {
			r.Off--
			if _, err := r.Skip(); err != nil {
				return err
			}
			continue
		}
		n, _, err := r.Length(c)
		if err != nil {
			return err
		}
		if msgpackwire.IsMap(c) {
			n *= 2
		}
		if n > 0 {
			if stack = append(stack, pending); len(stack) > limit {
				return errTooDeep
			}
			pending = n
		}
	}
}

// canonical appends the value at r with the entries of every map in it
// sorted canonically (compareKeys): how unknown fields are kept, so that
// writing them back is deterministic whoever wrote them first.
func canonical(dst []byte, r *msgpackwire.Reader, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	start := r.Off
	c, err := r.Code()
	if err != nil {
		return nil, err
	}
	if !msgpackwire.IsMap(c) && !msgpackwire.IsArray(c) {
		r.Off = start
		if _, err := r.Skip(); err != nil {
			return nil, err
		}
		return append(dst, r.B[start:r.Off]...), nil
	}
	n, _, err := r.Length(c)
	if err != nil {
		return nil, err
	}
	if n > r.Left() {
		return nil, errTruncated
	}
	dst = append(dst, r.B[start:r.Off]...)
	if msgpackwire.IsArray(c) {
		for range n {
			if dst, err = canonical(dst, r, depth+1); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	region := len(dst)
	spans := make([]span, 0, n)
	for range n {
		ks := len(dst)
		if dst, err = canonical(dst, r, depth+1); err != nil {
			return nil, err
		}
		ke := len(dst)
		if dst, err = canonical(dst, r, depth+1); err != nil {
			return nil, err
		}
		spans = append(spans, span{ks, ke, len(dst)})
	}
	sortSpans(dst, spans, region, nil)
	return dst, nil
}

// sortSpans puts the map entries es (written to b from region on) into
// canonical order; tmp is scratch, returned for reuse.
func sortSpans(b []byte, es []span, region int, tmp []byte) []byte {
	cmpEntry := func(x, y span) int {
		if c := compareKeys(b[x.start:x.keyEnd], b[y.start:y.keyEnd]); c != 0 {
			return c
		}
		return bytes.Compare(b[x.start:x.end], b[y.start:y.end]) // keys that encode alike (NaN)
	}
	if slices.IsSortedFunc(es, cmpEntry) {
		return tmp
	}
	slices.SortFunc(es, cmpEntry)
	tmp = append(tmp[:0], b[region:]...)
	at := region
	for _, e := range es {
		at += copy(b[at:], tmp[e.start-region:e.end-region])
	}
	return tmp
}
