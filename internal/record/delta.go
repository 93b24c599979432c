package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// A delta is a kept version written as the edits that make it out of
// another version's bytes (its base): a sequence of operations, then the
// CRC-32C of the bytes it makes (4 bytes, little-endian), so a delta
// applied to the wrong base, or damaged, is refused rather than read as
// data. Each operation is a uvarint h:
//
//   - h&1 == 1: a literal, the next h>>1 bytes of the delta;
//   - h&1 == 0: a copy of h>>1 bytes of the base, from the position where the
//     previous copy ended (0 at first) moved by a zigzag varint.
//
// A profile's versions differ in a few values at their places, so most
// copies continue where the previous one ended and take two or three bytes.

// ErrBadDelta is wrapped by the error of a delta that does not apply.
var ErrBadDelta = errors.New("record: the delta does not apply")

// deltaMinMatch is the shortest copy worth an operation.
const deltaMinMatch = 4

// deltaMaxCandidates bounds the earlier places of one 4-byte sequence of
// the base tried for a match.
const deltaMaxCandidates = 32

// appendOps appends to dst the operations that make target out of base.
func appendOps(dst, base, target []byte) []byte {
	idx := newDeltaIndex(base)
	lit, i, next := 0, 0, 0 // pending literals from lit; the base position the last copy ended at
	literal := func(end int) {
		if end > lit {
			dst = binary.AppendUvarint(dst, uint64(end-lit)<<1|1)
			dst = append(dst, target[lit:end]...)
		}
	}
	for i+deltaMinMatch <= len(target) {
		j, n := idx.match(base, target, i, next)
		if n < deltaMinMatch {
			i++
			continue
		}
		for i > lit && j > 0 && base[j-1] == target[i-1] { // take back what the literals repeat
			i, j, n = i-1, j-1, n+1
		}
		literal(i)
		dst = binary.AppendUvarint(dst, uint64(n)<<1)
		dst = binary.AppendUvarint(dst, zigzag(j-next))
		i += n
		lit, next = i, j+n
	}
	literal(len(target))
	return dst
}

// deltaIndex finds where a sequence of 4 bytes occurs in the base: head
// holds the last position of each hash, chain the one before each.
type deltaIndex struct {
	shift uint
	head  []int32
	chain []int32
}

func newDeltaIndex(base []byte) *deltaIndex {
	b := min(max(bits.Len(uint(len(base))), 8), 20)
	x := &deltaIndex{shift: uint(32 - b), head: make([]int32, 1<<b), chain: make([]int32, len(base))}
	for k := range x.head {
		x.head[k] = -1
	}
	for k := 0; k+deltaMinMatch <= len(base); k++ {
		h := x.hash(base[k:])
		x.chain[k], x.head[h] = x.head[h], int32(k)
	}
	return x
}

func (x *deltaIndex) hash(b []byte) uint32 {
	return (binary.LittleEndian.Uint32(b) * 2654435761) >> x.shift
}

// match finds the longest copy for target[i:]: where the last copy ended
// (next) when it matches there, else among the base's places of the same
// first bytes, the nearest to next of the longest. n < deltaMinMatch: none.
func (x *deltaIndex) match(base, target []byte, i, next int) (j, n int) {
	if n = common(base, target, next, i); n >= deltaMinMatch {
		return next, n
	}
	j, n = -1, 0
	c := x.head[x.hash(target[i:])]
	for tries := 0; c >= 0 && tries < deltaMaxCandidates; tries++ {
		k := int(c)
		if m := common(base, target, k, i); m > n || (m == n && m > 0 && abs(k-next) < abs(j-next)) {
			j, n = k, m
		}
		c = x.chain[c]
	}
	return j, n
}

// common is how many bytes base[j:] and target[i:] share from their start.
func common(base, target []byte, j, i int) int {
	if j < 0 || j >= len(base) {
		return 0
	}
	a, b := base[j:], target[i:]
	m := min(len(a), len(b))
	n := 0
	for ; n+8 <= m; n += 8 { // eight bytes at a time: a profile's versions share long runs
		if x := binary.LittleEndian.Uint64(a[n:]) ^ binary.LittleEndian.Uint64(b[n:]); x != 0 {
			return n + bits.TrailingZeros64(x)/8
		}
	}
	for n < m && a[n] == b[n] {
		n++
	}
	return n
}

// applyDelta makes the bytes a delta with its checksum (the previous
// layout's) describes out of base, into dst's storage, refusing a result
// over limit bytes.
func applyDelta(dst, base, delta []byte, limit int) ([]byte, error) {
	if len(delta) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than its checksum", ErrBadDelta, len(delta))
	}
	out, err := applyOps(dst, base, delta[:len(delta)-4], limit)
	if err != nil {
		return nil, err
	}
	if crc32.Checksum(out, crcTable) != binary.LittleEndian.Uint32(delta[len(delta)-4:]) {
		return nil, fmt.Errorf("%w: its checksum does not match (damaged, or its base is not the version it was made against)",
			ErrBadDelta)
	}
	return out, nil
}

// applyOps appends to dst[:0] the bytes the operations ops make out of
// base, refusing a result over limit bytes.
func applyOps(dst, base, ops []byte, limit int) ([]byte, error) {
	out, all := dst[:0], len(ops)
	if cap(out) == 0 {
		out = make([]byte, 0, min(len(base), limit))
	}
	next := 0
	for len(ops) > 0 {
		h, k := binary.Uvarint(ops)
		if k <= 0 || h>>1 == 0 || h>>1 > uint64(limit-len(out)) {
			return nil, fmt.Errorf("%w: a bad operation at byte %d", ErrBadDelta, all-len(ops))
		}
		ops = ops[k:]
		n := int(h >> 1)
		if h&1 == 1 {
			if n > len(ops) {
				return nil, fmt.Errorf("%w: a literal of %d bytes runs past its end", ErrBadDelta, n)
			}
			out, ops = append(out, ops[:n]...), ops[n:]
			continue
		}
		z, k := binary.Uvarint(ops)
		if k <= 0 {
			return nil, fmt.Errorf("%w: a copy without its position", ErrBadDelta)
		}
		ops = ops[k:]
		j := int64(next) + unzigzag(z)
		if j < 0 || j > int64(len(base)) || int64(n) > int64(len(base))-j {
			return nil, fmt.Errorf("%w: a copy of %d bytes from %d, outside its base of %d", ErrBadDelta, n, j, len(base))
		}
		out = append(out, base[j:j+int64(n)]...)
		next = int(j) + n
	}
	return out, nil
}

func zigzag(d int) uint64 { return uint64(d<<1) ^ uint64(d>>63) }

func unzigzag(z uint64) int64 { return int64(z>>1) ^ -int64(z&1) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
