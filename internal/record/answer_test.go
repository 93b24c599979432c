package record_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The answers of acquire.lua and save.lua leave off their tails when these
// hold nothing (issue 35: a table answer costs Redis per element), and read
// through their parsers they still say what the record holds: its fields,
// a trade, user ids and metadata when there are, the holder a lock was
// taken from, and none of these when there is none.
func TestAnswersSayWhatTheRecordHolds(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	oldMS := time.Now().Add(-time.Hour).UnixMilli()
	old := strconv.FormatInt(oldMS, 10)
	base := []any{"fmt", "2", "ver", "41", "epoch", "7", "data", "d41", "at", old, "schema", "3", "schema.min", "2",
		"hist.at", old, "inbox.seq", "0", "lock.token", "", "lock.job", ""}
	cases := []struct {
		name       string
		extra      []any
		uids, meta []byte
		check      func(t *testing.T, a record.AcquireResult)
	}{
		{"free, nothing beside the data", nil, nil, nil, func(t *testing.T, a record.AcquireResult) {
			if a.How != record.TakenFree || a.Trade != "" || a.UserIDs != nil || a.Meta != nil || a.PrevJob != "" ||
				a.Messages != nil || a.MoreMessages {
				t.Errorf("acquire of a free record = %+v", a)
			}
		}},
		{"free, with a trade, user ids and metadata", []any{"trade", "tr-1", "uids", "u-1", "meta", "m-1"},
			[]byte("u-1"), []byte("m-1"), func(t *testing.T, a record.AcquireResult) {
				if a.How != record.TakenFree || a.Trade != "tr-1" || string(a.UserIDs) != "u-1" || string(a.Meta) != "m-1" ||
					a.PrevJob != "" {
					t.Errorf("acquire of a free record with a trade, user ids and metadata = %+v", a)
				}
			}},
		{"expired", []any{"lock.token", "held", "lock.job", "server-b", "lock.at", old, "lock.presence", "0"},
			nil, nil, func(t *testing.T, a record.AcquireResult) {
				if a.How != record.TakenExpired || a.PrevJob != "server-b" || a.Trade != "" {
					t.Errorf("acquire of an expired lock = %+v, want taken from server-b", a)
				}
			}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := record.Key(r.Namespace, "PlayerData", "answers:"+strconv.Itoa(i))
			sum := record.SumField(41, oldMS, record.RecordSum([]byte("d41"), 3, 2, c.uids, c.meta))
			rdb.HSet(ctx, key, append(append([]any{"sum", sum}, base...), c.extra...)...)
			args := acquireArgs("server-a", "tok-a")
			args.Schema = 3
			a, err := record.Acquire(ctx, rdb, key, args)
			if err != nil || a.Outcome != record.Acquired {
				t.Fatalf("acquire = %+v, %v", a, err)
			}
			if a.Epoch != 8 || a.Ver != 41 || string(a.Data) != "d41" || strconv.FormatInt(a.At.UnixMilli(), 10) != old ||
				a.Schema != 3 || a.SchemaMin != 2 || !a.HistAt.Equal(a.At) || a.InboxSeq != 0 || a.Format != "2" ||
				a.Sum != sum || a.Now.Before(a.At) {
				t.Errorf("acquire = %+v, want the record's fields and epoch 8", a)
			}
			if bad := a.Stored().Check(); bad != nil {
				t.Errorf("the acquired record fails its checksum: %+v", bad)
			}
			c.check(t, a)

			s, err := record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeSave, Token: "tok-a", Data: []byte("d42"),
				Sum: "0badcafe", Trade: a.Trade}) // a pending trade lets only its own write through
			if err != nil || s.Outcome != record.Written || s.How != record.HowSaved || s.Ver != 42 || s.Epoch != 8 ||
				s.Moved || !s.HistAt.IsZero() || s.At.Before(a.Now) || s.DeadLettered != 0 || s.Tries != nil {
				t.Errorf("save = %+v, %v; want ver 42 at epoch 8, nothing else", s, err)
			}
			s, err = record.Save(ctx, rdb, key, record.SaveArgs{Mode: record.ModeRelease, Token: "tok-a"})
			if err != nil || s.Outcome != record.Written || s.How != record.HowReleased || s.Ver != 42 || s.Epoch != 8 ||
				!s.At.IsZero() {
				t.Errorf("release without data = %+v, %v; want ver 42 at epoch 8, no data written", s, err)
			}
		})
	}
}

// save.lua's common answer is one line of integers; anything else in its
// place is not save.lua's answer, and ParseSave says so instead of reading
// zeros from it.
func TestParseSaveLine(t *testing.T) {
	s, err := record.ParseSave("2,42,8,3,1700000000000")
	if err != nil || s.Outcome != record.Written || s.How != record.HowReleased || s.Ver != 42 || s.Epoch != 8 ||
		s.InboxSeq != 3 || s.At.UnixMilli() != 1700000000000 || s.Moved || !s.HistAt.IsZero() {
		t.Errorf("ParseSave of a release's line = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "1", "1,42,8,3", "1,42,8,3,0,0", "3,42,8,3,0", "1,x,8,3,0", "1,42,8,,0", "OK"} {
		if _, err := record.ParseSave(bad); !errors.Is(err, record.ErrUnexpectedAnswer) {
			t.Errorf("ParseSave(%q) = %v, want ErrUnexpectedAnswer", bad, err)
		}
	}
}

// acquire.lua's OK answer carries its words and integers in one line of
// ten fields; a line of another shape is not acquire.lua's answer.
func TestParseAcquireLine(t *testing.T) {
	a, err := record.ParseAcquire([]any{"OK", "free,8,41,1700000000000,3,2,,0,1700000000001,2", "d41", "41,1700000000000,c"})
	if err != nil || a.Outcome != record.Acquired || a.How != record.TakenFree || a.Epoch != 8 || a.Ver != 41 ||
		a.At.UnixMilli() != 1700000000000 || a.Schema != 3 || a.SchemaMin != 2 || !a.HistAt.IsZero() ||
		a.Now.UnixMilli() != 1700000000001 || a.Format != "2" || string(a.Data) != "d41" || a.Sum != "41,1700000000000,c" {
		t.Errorf("ParseAcquire = %+v, %v", a, err)
	}
	for _, bad := range []any{[]any{"OK"}, []any{"OK", "free"}, []any{"OK", "free,8,41,0,3,2,0,0,1"}, []any{"OK", int64(1)}} {
		if _, err := record.ParseAcquire(bad); !errors.Is(err, record.ErrUnexpectedAnswer) {
			t.Errorf("ParseAcquire(%v) = %v, want ErrUnexpectedAnswer", bad, err)
		}
	}
}
