package record_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The byte budget trims the oldest versions first, beyond the count's:
// after every write the kept versions take at most the budget (the newest
// is kept whatever its size), each reads back, and the plan says how many
// it trimmed for bytes.
func TestHistoryByteBudget(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(5, 5))
	h := newHistorian(t, r, "user:budget", 100, 3)
	h.writeN(rng, 3)
	whole := listHistory(t, h.rdb, h.key).Versions[1].Bytes // the newest, whole
	h.budget = 3 * whole
	trimmed := 0
	for range 30 {
		data := profileBytes(rng, h.data)
		keep := record.NewKeptWhole(h.ver, listHistory(t, h.rdb, h.key).Newest(h.ver), record.KeptMeta{At: h.at}, h.data, h.enc)
		trimmed += h.plan(keep).TrimmedBytes
		h.write(data)
		hist := h.history()
		if hist.Bytes() > h.budget {
			t.Fatalf("the kept versions take %d bytes, over the budget of %d", hist.Bytes(), h.budget)
		}
	}
	hist := h.history()
	if trimmed == 0 || len(hist.Versions) < 3 || hist.Versions[len(hist.Versions)-1].Ver != h.ver-1 {
		t.Fatalf("%d trimmed for bytes, %d kept (%s), newest %d; want trims, several kept, the newest %d", trimmed,
			len(hist.Versions), forms(hist), hist.Versions[len(hist.Versions)-1].Ver, h.ver-1)
	}
	// A budget below one version keeps the newest alone.
	h.budget = 1
	h.write(profileBytes(rng, h.data))
	if hist := h.history(); len(hist.Versions) != 1 {
		t.Fatalf("a budget of 1 byte keeps %d versions (%s), want the newest", len(hist.Versions), forms(hist))
	}
}

// A history in the layout of the builds between deltas and checksummed
// metadata (f<ver> whole, v<ver> deltas) reads; the next write rewrites its
// newest in the current layout, and the older ones still read through it.
func TestHistoryReadsThePreviousLayout(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(6, 6))
	h := newHistorian(t, r, "user:legacy", 10, 23)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	var vers [][]byte
	var data []byte
	for range 4 {
		data = profileBytes(rng, data)
		vers = append(vers, data)
	}
	var fields []any
	for v := int64(1); v <= 4; v++ {
		meta := record.KeptMeta{At: time.UnixMilli(now - 1000*(5-v)), Schema: 2, SchemaMin: 1}
		h.kept[v] = vers[v-1]
		if v == 4 {
			fields = record.AppendLegacyWhole(fields, v, meta, vers[v-1], h.enc)
		} else {
			fields = record.AppendLegacyDelta(fields, v, meta, vers[v-1], vers[v])
		}
	}
	if err := h.rdb.HSet(ctx, record.HistoryKey(h.key), fields...).Err(); err != nil {
		t.Fatal(err)
	}
	h.ver, h.data = 5, profileBytes(rng, data)
	h.rdb.HSet(ctx, h.key, "ver", 5, "hist.at", now-1000)
	hist := h.history()
	if got := forms(hist); got != "dddw" {
		t.Fatalf("forms %q, want dddw", got)
	}
	for _, s := range hist.Versions {
		if !s.Legacy || s.Schema != 2 || s.SchemaMin != 1 || s.At.UnixMilli() != now-1000*(5-s.Ver) {
			t.Fatalf("version %d listed as %+v, want its metadata", s.Ver, s.Kept)
		}
	}
	h.write(profileBytes(rng, h.data))
	hist = h.history()
	if got := forms(hist); got != "ddddw" {
		t.Fatalf("forms %q, want ddddw: the previous newest rewritten as a delta", got)
	}
	if s := hist.Versions[3]; s.Legacy || s.Base != 5 || s.Schema != 2 || s.At.UnixMilli() != now-1000 {
		t.Fatalf("the rewritten version %+v, want the current layout against 5, its metadata kept", s.Kept)
	}
}

// The previous layouts' metadata carries no checksum: it is validated. A
// time or schema that does not parse as this library writes it (a letter,
// a sign, a leading zero, a missing part) is refused, not read as zero.
func TestHistoryPreviousLayoutMetadataIsValidated(t *testing.T) {
	r := testsupport.StartRedis(t)
	h := newHistorian(t, r, "user:text", 10, 23)
	ctx := context.Background()
	enc := h.enc
	for i, meta := range []string{"x,2,1", "1765000000000,x,1", "1765000000000,-1,0", "1765000000000,02,1",
		"1765000000000,2", "1765000000000,1,2", "", "1765000000000,2,1,"} {
		hk := record.HistoryKey(h.key)
		h.rdb.Del(ctx, hk)
		if err := h.rdb.HSet(ctx, hk, record.HistDataField(1), record.AppendWholeText(nil, enc, []byte("data")),
			record.HistMetaField(1), meta).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := record.Versions(ctx, h.rdb, h.key)
		if err != nil || len(res.Kept) != 1 || res.Kept[0].Err == nil {
			t.Errorf("case %d: text metadata %q listed as %+v, %v; want refused", i, meta, res.Kept, err)
		}
	}
}

// A version whose every field a tool deleted, from between two kept ones,
// is listed as missing (the next one says it was kept before it): a read
// at its time is refused, never answered with the version before it.
func TestHistoryMissingVersionIsNamed(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(8, 8))
	h := newHistorian(t, r, "user:gap", 10, 1) // every other version whole: the one before the gap reads alone
	h.writeN(rng, 6)
	hist := h.history()
	gone := hist.Versions[2]
	ctx := context.Background()
	for _, name := range []string{"k" + strconv.FormatInt(gone.Ver, 10)} {
		keys, _ := h.rdb.HKeys(ctx, record.HistoryKey(h.key)).Result()
		for _, k := range keys {
			if k == name || strings.HasPrefix(k, name+".") {
				h.rdb.HDel(ctx, record.HistoryKey(h.key), k)
			}
		}
	}
	hist = listHistory(t, h.rdb, h.key)
	i := slices.IndexFunc(hist.Versions, func(s record.Stored) bool { return s.Ver == gone.Ver })
	if i < 0 || hist.Versions[i].Err == nil || !hist.Versions[i].At.IsZero() {
		t.Fatalf("the deleted version is listed as %+v, want it named, with an error and no time", hist.Versions)
	}
	if _, err := hist.Read(ctx, h.rdb, h.key, gone.Ver, h.dec); err == nil {
		t.Fatal("the deleted version reads")
	}
}

// A write trims at most MaxTrim bytes of kept versions (record.MaxTrimBytes,
// 64 MiB, for the driver), the oldest first: a history far over its bounds
// (lowered, or grown by an earlier build) shrinks over several writes, none
// holding Redis long, and every version kept reads at every step.
func TestHistoryTrimIsBoundedPerWrite(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(9, 9))
	h := newHistorian(t, r, "user:trim", 40, 23)
	for range 30 {
		h.write(randomBytes(rng, 3000)) // incompressible: every version whole, about 3 KB
	}
	if n := len(h.history().Versions); n != 29 {
		t.Fatalf("%d kept, want 29", n)
	}
	h.keep, h.maxTrim = 2, 64000 // lowered: 27 versions (81 KB) to trim, 64 KB a write
	var kept []int
	for range 3 {
		h.write(randomBytes(rng, 3000))
		kept = append(kept, len(h.history().Versions))
	}
	if !slices.Equal(kept, []int{29 - 21 + 1, 2, 2}) {
		t.Fatalf("kept %v after each write, want [9 2 2]: at most 64 KB trimmed a write (21 versions)", kept)
	}
}

// randomBytes is n random bytes: they neither compress nor diff.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// A delta of the previous layout too long for the listing to read its
// metadata (one field over 2 KiB) is listed all the same, with one HGET of
// its own, and reads.
func TestHistoryListsALongPreviousLayoutDelta(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(10, 10))
	h := newHistorian(t, r, "user:longv", 10, 23)
	ctx := context.Background()
	old, newer := randomBytes(rng, 5000), randomBytes(rng, 5000) // a delta of one against the other is long
	meta := record.KeptMeta{At: time.UnixMilli(1765000000123), Schema: 3, SchemaMin: 1}
	fields := record.AppendLegacyDelta(nil, 1, meta, old, newer)
	fields = record.AppendLegacyWhole(fields, 2, record.KeptMeta{At: time.UnixMilli(1765000001123)}, newer, h.enc)
	if err := h.rdb.HSet(ctx, record.HistoryKey(h.key), fields...).Err(); err != nil {
		t.Fatal(err)
	}
	h.kept[1], h.kept[2] = old, newer
	hist := h.history()
	if got := forms(hist); got != "dw" {
		t.Fatalf("forms %q, want dw", got)
	}
	if k := hist.Versions[0]; k.Err != nil || !k.At.Equal(meta.At) || k.Schema != 3 || k.SchemaMin != 1 {
		t.Fatalf("the long delta listed as %+v, want its metadata", k.Kept)
	}
}
