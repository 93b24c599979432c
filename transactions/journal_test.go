package transactions_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/tradejournal"
	"github.com/ckernel/playerdata/testsupport"
	"github.com/ckernel/playerdata/transactions"
)

// TestReadShowsTheJournal: a trade the library wrote reads here with every
// field, through each state.
func TestReadShowsTheJournal(t *testing.T) {
	r := testsupport.StartRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	in := tradejournal.New(c, r.Namespace, time.Hour)
	out := transactions.New(c, r.Namespace)
	if got, want := out.Key("t1"), in.Key("t1"); got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	if _, err := out.Read(ctx, "t1"); !errors.Is(err, transactions.ErrNotFound) {
		t.Fatalf("Read of no entry = %v, want ErrNotFound", err)
	}
	parts := []tradejournal.Participant{
		{Driver: "PlayerData", Key: "a", Token: "ta", Ver: 3, Image: []byte("image-a"), Schema: 2, SchemaMin: 1},
		{Driver: "Inventory", Key: "b", Token: "tb", Image: []byte("image-b")},
	}
	if err := in.Begin(ctx, "t1", "server-a", parts); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		do      func() error
		state   transactions.State
		settled []bool
	}{
		{"prepared", func() error { return nil }, transactions.Prepared, []bool{false, false}},
		{"committed", func() error { return in.Commit(ctx, "t1") }, transactions.Committed, []bool{false, false}},
		{"settled", func() error { return in.MarkSettled(ctx, "t1", 1) }, transactions.Committed, []bool{false, true}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := step.do(); err != nil {
				t.Fatal(err)
			}
			e, err := out.Read(ctx, "t1")
			if err != nil {
				t.Fatal(err)
			}
			if e.ID != "t1" || e.State != step.state || e.Coordinator != "server-a" || e.At.IsZero() ||
				!reflect.DeepEqual(e.Settled, step.settled) {
				t.Fatalf("Read = %+v, want %s by server-a, settled %v", e, step.state, step.settled)
			}
			want := []transactions.Participant{
				{Driver: "PlayerData", Key: "a", Token: "ta", Ver: 3, Image: []byte("image-a"), Schema: 2, SchemaMin: 1},
				{Driver: "Inventory", Key: "b", Token: "tb", Image: []byte("image-b")},
			}
			if !reflect.DeepEqual(e.Participants, want) {
				t.Fatalf("Participants = %+v, want %+v", e.Participants, want)
			}
		})
	}
}
