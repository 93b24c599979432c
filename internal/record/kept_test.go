package record

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ckernel/playerdata/internal/damage"
)

// keptCase is one kept value and what it must read back as: version ver,
// stored whole or as a delta against base (baseData).
type keptCase struct {
	name     string
	ver      int64
	meta     KeptMeta
	data     []byte
	base     int64
	baseData []byte
	value    []byte // the value as the fields hold it, put back together
}

// keptCases are a whole version and a delta, short (chunked) and long.
func keptCases(tb testing.TB) []keptCase {
	tb.Helper()
	enc, _ := newKeptCodec(tb)
	rng := rand.New(rand.NewPCG(7, 7))
	small := make([]byte, 300)
	for i := range small {
		small[i] = "abcd:0123,"[rng.IntN(10)]
	}
	next := edited(rng, small, 3)
	big := make([]byte, 6000)
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	bigNext := edited(rng, big, 5)
	meta := KeptMeta{At: time.UnixMilli(1_765_000_000_123), Schema: 5, SchemaMin: 3}
	cases := []keptCase{
		{name: "whole", ver: 7, meta: meta, data: small},
		{name: "delta", ver: 7, meta: meta, data: small, base: 9, baseData: next},
		{name: "long whole", ver: 12, meta: meta, data: big},
		{name: "long delta", ver: 12, meta: meta, data: big, base: 13, baseData: bigNext},
	}
	for i := range cases {
		c := &cases[i]
		var v KeptValue
		if c.base == 0 {
			v = NewKeptWhole(c.ver, c.ver-2, c.meta, c.data, enc)
		} else {
			v = keptDeltaOf(c.ver, c.ver-2, c.meta, c.data, c.base, c.baseData)
		}
		c.value = append(bytes.Clone(v.Head), v.Body...)
	}
	return cases
}

// newKeptCodec returns a compressor and decompressor closed with tb.
func newKeptCodec(tb testing.TB) (*zstd.Encoder, *zstd.Decoder) {
	tb.Helper()
	enc, dec, err := NewCodec()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = enc.Close(); dec.Close() })
	return enc, dec
}

// readKept reads value as version ver would be read: its header (what a
// listing shows), then its data (what a read returns).
func readKept(ver int64, value, baseData []byte, dec *zstd.Decoder) (keptHead, []byte, error) {
	h, err := parseHead(ver, value)
	if err != nil {
		return h, nil, err
	}
	data, err := decodeKept(nil, ver, h, value[h.n:], baseData, dec)
	return h, data, err
}

// checkKept fails unless value (c's, edited) is refused, or reads back as
// c's version exactly: its time, schemas, form, base and data.
func checkKept(t *testing.T, c keptCase, value []byte, dec *zstd.Decoder, what string) {
	t.Helper()
	h, data, err := readKept(c.ver, value, c.baseData, dec)
	if err != nil {
		return
	}
	if !h.At.Equal(c.meta.At) || h.Schema != c.meta.Schema || h.SchemaMin != c.meta.SchemaMin || h.base != c.base ||
		!bytes.Equal(data, c.data) {
		t.Fatalf("%s: read back as at %s, schema %d/%d, base %d, %d bytes of data, with no error; want refused or "+
			"at %s, schema %d/%d, base %d, the %d bytes written", what, h.At, h.Schema, h.SchemaMin, h.base, len(data),
			c.meta.At, c.meta.Schema, c.meta.SchemaMin, c.base, len(c.data))
	}
}

// The attack of issue 32 on one kept value: every byte flipped (each bit,
// and all of them), the value cut short at every byte, and extended at its
// end. Each is refused or reads back as written: a damaged time or schema
// is never read as another time or migrated again, damaged data never read
// as data.
func TestKeptValueEveryByte(t *testing.T) {
	_, dec := newKeptCodec(t)
	for _, c := range keptCases(t) {
		t.Run(c.name, func(t *testing.T) {
			checkKept(t, c, c.value, dec, "the value as written")
			if _, data, err := readKept(c.ver, c.value, c.baseData, dec); err != nil || !bytes.Equal(data, c.data) {
				t.Fatalf("the value as written reads %d bytes, %v", len(data), err)
			}
			damage.Every(c.value, func(v []byte, what string) { checkKept(t, c, v, dec, what) })
			for _, tail := range [][]byte{{0xff}, c.value[:1], c.value} {
				checkKept(t, c, append(bytes.Clone(c.value), tail...), dec, "extended")
			}
		})
	}
}

// The header binds a version to its number: a value stored under another
// version's field (a tool renaming fields) is refused.
func TestKeptValueIsBoundToItsVersion(t *testing.T) {
	_, dec := newKeptCodec(t)
	for _, c := range keptCases(t) {
		if _, _, err := readKept(c.ver+1, c.value, c.baseData, dec); err == nil {
			t.Errorf("%s: the value of version %d reads as version %d", c.name, c.ver, c.ver+1)
		}
	}
}

// A delta applied to another base than the one it was made against is
// refused.
func TestKeptDeltaOfAnotherBase(t *testing.T) {
	_, dec := newKeptCodec(t)
	for _, c := range keptCases(t) {
		if c.base == 0 {
			continue
		}
		other := bytes.Clone(c.baseData)
		other[len(other)/2] ^= 1
		if _, _, err := readKept(c.ver, c.value, other, dec); err == nil {
			t.Errorf("%s: applied to another base, it reads", c.name)
		}
	}
}

// A newer build's layout (its header checksummed as every layout's is) is
// refused as such, never misread; a damaged layout byte is damage.
func TestKeptLayoutTooNew(t *testing.T) {
	_, dec := newKeptCodec(t)
	c := keptCases(t)[0]
	v := bytes.Clone(c.value)
	v[0] = keptLayout + 1
	n := int(v[1])
	sum := headSum(c.ver, v[:n-4])
	v[n-4], v[n-3], v[n-2], v[n-1] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	if _, _, err := readKept(c.ver, v, c.baseData, dec); !errors.Is(err, ErrLayoutTooNew) {
		t.Fatalf("a newer layout reads as %v, want ErrLayoutTooNew", err)
	}
	v = bytes.Clone(c.value)
	v[0] = keptLayout + 1
	if _, _, err := readKept(c.ver, v, c.baseData, dec); err == nil || errors.Is(err, ErrLayoutTooNew) {
		t.Fatalf("a damaged layout byte reads as %v, want damage", err)
	}
}

// FuzzKeptValue edits one kept value once (flips, sets, cuts or extends it
// at any byte): the value is refused, or reads back as written.
func FuzzKeptValue(f *testing.F) {
	for c := range 4 {
		for _, op := range []byte{0, 1, 2, 3} {
			f.Add(uint8(c), op, uint16(0), byte(0x01))
			f.Add(uint8(c), op, uint16(5), byte(0x80))
			f.Add(uint8(c), op, uint16(30), byte(0xff))
		}
	}
	cases := keptCases(f)
	_, dec := newKeptCodec(f)
	f.Fuzz(func(t *testing.T, which, op uint8, pos uint16, b byte) {
		c := cases[int(which)%len(cases)]
		checkKept(t, c, damage.Once(c.value, op, int(pos), b), dec, "edited")
	})
}
