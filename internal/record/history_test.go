package record_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// historian writes one record the way the driver does: each data write
// keeps the data it replaces, whole, with the previous newest version as a
// delta against it when History.Plan says so.
type historian struct {
	t        testing.TB
	rdb      redis.UniversalClient
	key      string
	enc      *zstd.Encoder
	dec      *zstd.Decoder
	keep     int
	maxChain int
	ver      int64
	data     []byte
	at       time.Time        // when data was written (the record's at)
	kept     map[int64][]byte // every version's data
	rebase   bool             // send the plan (false: the script trims by itself and rewrites nothing)
	budget   int              // the byte budget of the plan (0: none)
	maxTrim  int              // the plan's MaxTrim (0: record.MaxTrimBytes)
}

func newHistorian(t testing.TB, r *testsupport.Redis, name string, keep, maxChain int) *historian {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = enc.Close(); dec.Close() })
	h := &historian{t: t, rdb: r.Client(t), key: record.Key(r.Namespace, "PlayerData", name), enc: enc, dec: dec,
		keep: keep, maxChain: maxChain, kept: map[int64][]byte{}, rebase: true}
	res, err := record.Acquire(context.Background(), h.rdb, h.key, acquireArgs("server-a", "tok-a"))
	if err != nil || res.Outcome != record.Acquired {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	return h
}

// write writes data, keeping the data it replaces.
func (h *historian) write(data []byte) record.SaveArgs {
	h.t.Helper()
	ctx := context.Background()
	a := record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: data, History: h.keep, HistoryEvery: time.Hour}
	if h.data != nil {
		a.KeepMeta = record.KeptMeta{At: h.at}
		hist := listHistory(h.t, h.rdb, h.key)
		a.Keep = record.NewKeptWhole(h.ver, hist.Newest(h.ver), a.KeepMeta, h.data, h.enc)
		a.KeepVer, a.KeepAlways = h.ver, true
		if h.rebase {
			plan := h.plan(a.Keep)
			a.KeepPlan = &plan
		}
	}
	res, err := record.Save(ctx, h.rdb, h.key, a)
	if err != nil || res.Outcome != record.Written || res.VersionSkipped {
		h.t.Fatalf("save: %+v, %v", res, err)
	}
	if h.data != nil {
		h.kept[h.ver] = h.data
	}
	h.ver, h.data, h.at = res.Ver, data, res.At
	return a
}

// plan lists the history and plans the write that keeps h.data (value).
func (h *historian) plan(value record.KeptValue) record.HistoryPlan {
	h.t.Helper()
	hist, stored, err := record.ListForKeep(context.Background(), h.rdb, h.key)
	if err != nil {
		h.t.Fatal(err)
	}
	if held, _ := h.rdb.HGet(context.Background(), h.key, record.FieldData).Bytes(); !bytes.Equal(stored, held) {
		h.t.Fatalf("ListForKeep read %d bytes of data, the record holds %d (the version a write keeps)", len(stored), len(held))
	}
	budget := h.budget
	if budget == 0 {
		budget = 1 << 40
	}
	return hist.Plan(record.KeepSpec{Ver: h.ver, Data: h.data, Value: value, Count: h.keep, Budget: budget,
		MaxChain: h.maxChain, MaxTrim: h.maxTrim}, h.dec)
}

// writeN writes n changes of the last data and returns the last.
func (h *historian) writeN(rng *rand.Rand, n int) []byte {
	for range n {
		h.write(profileBytes(rng, h.data))
	}
	return h.data
}

// history reads the record's history and checks that every kept version
// reads back as it was written, and that the newest is whole.
func (h *historian) history() record.History {
	h.t.Helper()
	hist := listHistory(h.t, h.rdb, h.key)
	for _, s := range hist.Versions {
		got, err := hist.Read(context.Background(), h.rdb, h.key, s.Ver, h.dec)
		if err != nil || !bytes.Equal(got, h.kept[s.Ver]) {
			h.t.Fatalf("version %d (%s) reads %d bytes, %v; want the %d written", s.Ver, s.Form, len(got), err, len(h.kept[s.Ver]))
		}
	}
	if n := len(hist.Versions); n > 0 && hist.Versions[n-1].Form != record.FormWhole {
		h.t.Fatalf("the newest version is stored %s, want whole", hist.Versions[n-1].Form)
	}
	return hist
}

// listHistory lists the history of the record at key.
func listHistory(t testing.TB, rdb redis.UniversalClient, key string) record.History {
	t.Helper()
	res, err := record.Versions(context.Background(), rdb, key)
	if err != nil {
		t.Fatal(err)
	}
	return res.History
}

// forms is the forms of a history's versions, oldest first: "dddw".
func forms(h record.History) string {
	var b []byte
	for _, s := range h.Versions {
		b = append(b, s.Form.String()[0])
	}
	return string(b)
}

// profileBytes is 1 KiB with some structure; each call changes a few
// bytes of the last.
func profileBytes(rng *rand.Rand, last []byte) []byte {
	if last == nil {
		b := make([]byte, 1024)
		for i := range b {
			b[i] = "abcdefgh:0123456789,"[rng.IntN(20)]
		}
		return b
	}
	b := bytes.Clone(last)
	for range 4 {
		b[rng.IntN(len(b))] = byte('0' + rng.IntN(10))
	}
	return b
}

// Versions kept by successive writes chain as deltas, each against the next
// newer one, the newest whole; every one reads back; dropping the oldest
// never breaks a chain; every maxChain deltas a version stays whole; and the
// hash stays a listpack (every value at most 64 bytes).
func TestHistoryChainsDeltas(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(1, 1))
	tests := []struct {
		name           string
		keep, maxChain int
		writes         int
		want           string
	}{
		{"one kept", 1, 23, 6, "w"},
		{"two kept", 2, 23, 6, "dw"},
		{"chain within the history", 8, 23, 12, "dddddddw"},
		{"chain bound 3", 10, 3, 14, "wdddwdddww"},
		{"chain bound 1", 5, 1, 8, "dwdww"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistorian(t, r, tc.name, tc.keep, tc.maxChain)
			for range tc.writes {
				h.writeN(rng, 1)
				h.history()
			}
			hist := h.history()
			if got := forms(hist); got != tc.want {
				t.Errorf("forms %q, want %q (d: delta, w: whole)", got, tc.want)
			}
			if r.Kind != testsupport.KindMiniredis {
				if enc, _ := h.rdb.ObjectEncoding(context.Background(), record.HistoryKey(h.key)).Result(); enc != "listpack" {
					t.Errorf("the history hash is a %s, want a listpack", enc)
				}
			}
		})
	}
}

// The script follows the writer's plan only when it finds the history as
// the writer read it (the record's hist.at unchanged): a plan made from a
// stale read keeps the version whole, rewrites nothing and trims by itself.
func TestHistoryPlanOnlyOfTheHistoryAsRead(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(2, 2))
	h := newHistorian(t, r, "user:1", 3, 23)
	data := h.writeN(rng, 4)
	if got := forms(h.history()); got != "ddw" {
		t.Fatalf("forms %q, want ddw", got)
	}
	ctx := context.Background()
	meta := record.KeptMeta{At: h.at}
	listed := listHistory(t, h.rdb, h.key)
	keep := record.NewKeptWhole(h.ver, listed.Newest(h.ver), meta, h.data, h.enc)
	plan := h.plan(keep)
	if plan.RewriteVer == 0 || len(plan.Drop) == 0 {
		t.Fatalf("plan %+v: want a rewrite and a trim", plan)
	}
	plan.Seen = "1" // as if the history had changed since the listing
	data = profileBytes(rng, data)
	a := record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: data, History: 3, HistoryEvery: time.Hour,
		Keep: keep, KeepVer: h.ver, KeepMeta: meta, KeepAlways: true, KeepPlan: &plan}
	res, err := record.Save(ctx, h.rdb, h.key, a)
	if err != nil || res.Outcome != record.Written {
		t.Fatalf("save: %+v, %v", res, err)
	}
	h.kept[h.ver], h.ver, h.data, h.at = h.data, h.ver+1, data, res.At
	if got := forms(h.history()); got != "dww" {
		t.Fatalf("forms %q after a stale plan, want dww (trimmed to 3, nothing rewritten)", got)
	}
	// A write of the same data again (a retried save) replaces the version.
	if parsed, err := record.ParseSaveArgs(stringArgs(a.Call(h.key).Call.Args)); err != nil || parsed.KeepPlan == nil ||
		parsed.KeepPlan.Seen != "1" || parsed.KeepPlan.RewriteVer != plan.RewriteVer ||
		parsed.KeepPlan.Rewrite.Len() != plan.Rewrite.Len() || parsed.Keep.Len() != a.Keep.Len() ||
		len(parsed.KeepPlan.Drop) != len(plan.Drop) || parsed.KeepVer != a.KeepVer || !parsed.KeepAlways ||
		!parsed.KeepMeta.At.Equal(a.KeepMeta.At) {
		t.Fatalf("ParseSaveArgs does not read back the keep option: %+v, %v", parsed, err)
	}
}

// stringArgs is ARGV as a script sees it.
func stringArgs(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			out[i] = string(v)
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}

// Versions written whole with text metadata (d<ver>, t<ver>) read, and the
// next write rewrites the newest of them as a delta.
func TestHistoryReadsWholeTextVersions(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(3, 3))
	h := newHistorian(t, r, "user:1", 10, 23)
	ctx := context.Background()
	var data []byte
	now := time.Now().UnixMilli()
	for v := int64(1); v <= 3; v++ {
		data = profileBytes(rng, data)
		h.kept[v] = data
		if err := h.rdb.HSet(ctx, record.HistoryKey(h.key), record.HistDataField(v), record.AppendWholeText(nil, h.enc, data),
			record.HistMetaField(v), fmt.Sprintf("%d,2,1", now-1000*(4-v))).Err(); err != nil {
			t.Fatal(err)
		}
	}
	h.ver = 4
	h.rdb.HSet(ctx, h.key, "ver", 4, "hist.at", now-1000) // as the builds that wrote them set it
	data = profileBytes(rng, data)
	h.data = data
	res, err := record.Versions(ctx, h.rdb, h.key)
	if err != nil || len(res.Kept) != 3 {
		t.Fatalf("versions: %+v, %v", res, err)
	}
	for _, k := range res.Kept {
		if k.Form != record.FormWholeText || k.Schema != 2 || k.SchemaMin != 1 || k.At.IsZero() {
			t.Fatalf("listed %+v, want whole with text metadata, schema 2, min 1, a write time", k)
		}
	}
	h.write(profileBytes(rng, data))
	hist := h.history()
	if got := forms(hist); got != "wwdw" {
		t.Fatalf("forms %q, want wwdw: the newest text version rewritten as a delta", got)
	}
	if k := hist.Versions[2]; k.Schema != 2 || k.SchemaMin != 1 || k.At.UnixMilli() != now-1000 {
		t.Fatalf("the rewritten version has %+v, want its schema, min-reader and write time kept", k.Kept)
	}
}

// A damaged version is refused, and so is every older version whose chain
// of deltas leads through it, down to the next whole one; the others read.
func TestHistoryDamageCostsItsChain(t *testing.T) {
	r := testsupport.StartRedis(t)
	rng := rand.New(rand.NewPCG(4, 4))
	h := newHistorian(t, r, "user:1", 12, 4)
	h.writeN(rng, 12)
	hist := h.history()
	if got := forms(hist); got != "ddddwddddww" {
		t.Fatalf("forms %q, want ddddwddddww", got)
	}
	damaged := hist.Versions[7] // a delta, with two more below it down to the whole Versions[4]
	ctx := context.Background()
	field := fmt.Sprintf("k%d", damaged.Ver)
	raw, err := h.rdb.HGet(ctx, record.HistoryKey(h.key), field).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 0xff
	h.rdb.HSet(ctx, record.HistoryKey(h.key), field, raw)
	hist = listHistory(t, h.rdb, h.key)
	health, err := hist.Check(ctx, h.rdb, h.key, h.dec)
	if err != nil {
		t.Fatal(err)
	}
	for i, hv := range health {
		s := hist.Versions[len(hist.Versions)-1-i]
		_, err := hist.Read(ctx, h.rdb, h.key, s.Ver, h.dec)
		var ve *record.VersionError
		switch {
		case s.Ver <= damaged.Ver && s.Ver > hist.Versions[4].Ver: // itself, and the deltas that need it
			if hv.Err == nil || hv.Needs != damaged.Ver || !errors.As(err, &ve) || ve.Needs != damaged.Ver {
				t.Errorf("version %d: check %v (needs %d), read %v; want it unreadable, needing %d", s.Ver, hv.Err, hv.Needs, err, damaged.Ver)
			}
		default:
			if hv.Err != nil || err != nil {
				t.Errorf("version %d: check %v, read %v; want it to read", s.Ver, hv.Err, err)
			}
		}
	}
}
