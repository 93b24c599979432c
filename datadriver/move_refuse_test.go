package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
)

// encodedPlayer is a player's data as a prepare carries it.
func encodedPlayer(t *testing.T, c int) []byte {
	t.Helper()
	b, err := msgpackMarshal(player{Coins: c})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMovePrepareIsIdempotent(t *testing.T) {
	mp := newMovePair(t)
	prep := datadriver.MovePrepare{ID: "move-1", From: "server-a", To: "server-b", Window: 2 * time.Second,
		Data: encodedPlayer(t, 5)}
	first := datadriver.PrepareMove(mp.db, "user:idem", prep)
	again := datadriver.PrepareMove(mp.db, "user:idem", prep)
	if !first.Accepted || !again.Accepted || first.Token == "" || again.Token != first.Token {
		t.Fatalf("a repeated prepare: %+v then %+v, want the same accept", first, again)
	}
	other := prep
	other.ID = "move-2"
	if a := datadriver.PrepareMove(mp.db, "user:idem", other); a.Accepted || a.Reason != datadriver.RefusedBusy {
		t.Fatalf("another move of a key with one pending: %+v, want refused busy", a)
	}
}

func TestMovePrepareRefusals(t *testing.T) {
	mp := newMovePair(t)
	if _, err := mp.db.Join(ctxT(t), "user:held"); err != nil {
		t.Fatal(err)
	}
	ok := datadriver.MovePrepare{ID: "m", From: "server-a", To: "server-b", Window: 2 * time.Second,
		Data: encodedPlayer(t, 1)}
	for _, tt := range []struct {
		name string
		key  string
		edit func(*datadriver.MovePrepare)
		want datadriver.MoveRefusal
	}{
		{"addressed to another server", "user:1", func(m *datadriver.MovePrepare) { m.To = "server-x" }, datadriver.RefusedNotAddressed},
		{"expired", "user:2", func(m *datadriver.MovePrepare) { m.Window = 0 }, datadriver.RefusedExpired},
		{"expiry out of bounds", "user:3", func(m *datadriver.MovePrepare) { m.Window = 2 * time.Minute }, datadriver.RefusedExpired},
		{"schema too new", "user:4", func(m *datadriver.MovePrepare) { m.SchemaMin = 3 }, datadriver.RefusedSchema},
		{"data that does not decode", "user:5", func(m *datadriver.MovePrepare) { m.Data = []byte{0xc1} }, datadriver.RefusedBadData},
		{"a schema past 32 bits", "user:6", func(m *datadriver.MovePrepare) { m.Schema = 1 << 31 }, datadriver.RefusedBadData},
		{"a negative schema", "user:7", func(m *datadriver.MovePrepare) { m.Schema = -1 }, datadriver.RefusedBadData},
		{"a key the target has", "user:held", func(*datadriver.MovePrepare) {}, datadriver.RefusedHeld},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := ok
			tt.edit(&m)
			if a := datadriver.PrepareMove(mp.db, tt.key, m); a.Accepted || a.Reason != tt.want {
				t.Fatalf("answer %+v, want refused %s", a, tt.want)
			}
		})
	}
}

func TestMovePrepareUnsignedWithRequestKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	pr := newPair(t, func(c *datadriver.NodeConfig) { c.RequestKey = key })
	da, db := players(t, pr.a), players(t, pr.b)
	prep := datadriver.MovePrepare{ID: "m", From: "server-a", To: "server-b", Window: 2 * time.Second,
		Data: encodedPlayer(t, 1)}
	if a := datadriver.PrepareMove(db, "user:unsigned", prep); a.Accepted || a.Reason != datadriver.RefusedUnsigned {
		t.Fatalf("an unsigned prepare with RequestKey set: %+v, want refused unsigned", a)
	}
	// The real move is signed, and lands.
	p := joinWith(t, da, "user:signed", 9)
	if err := p.MoveTo(ctxT(t), "server-b"); err != nil {
		t.Fatalf("a signed MoveTo: %v", err)
	}
	q, err := db.Join(ctxT(t), "user:signed")
	if err != nil || coins(q) != 9 {
		t.Fatalf("target join after a signed move: %v", err)
	}
}

// stillLive checks that p is live with c coins after a move that failed:
// it takes an Update and saves it.
func stillLive(t *testing.T, p *datadriver.Profile[player], c int) {
	t.Helper()
	if err := p.Err(); err != nil {
		t.Fatalf("the session ended: %v", err)
	}
	if got := coins(p); got != c {
		t.Fatalf("coins %d after the failed move, want %d", got, c)
	}
	if err := p.Update(func(d *player) { d.Coins++ }); err != nil {
		t.Fatalf("Update after the failed move: %v", err)
	}
	if err := p.Save(ctxT(t)); err != nil {
		t.Fatalf("Save after the failed move: %v", err)
	}
}

func TestMoveToErrorsLeaveTheSessionLive(t *testing.T) {
	pr := newPair(t)
	da := players(t, pr.a)
	// server-b runs no PlayerData driver.
	t.Run("no driver", func(t *testing.T) {
		p := joinWith(t, da, "user:nodriver", 3)
		err := p.MoveTo(ctxT(t), "server-b")
		var re *datadriver.MoveRefusedError
		if !errors.As(err, &re) || re.Reason != datadriver.RefusedNoDriver || !errors.Is(err, datadriver.ErrMoveRefused) {
			t.Fatalf("MoveTo a server without the driver: %v, want refused no-driver", err)
		}
		stillLive(t, p, 3)
		// The refused move is the record's last move, CANCELLED with its
		// reason (written after MoveTo answered).
		eventually(t, 3*time.Second, "the cancelled move in the record", func() bool {
			f := recordFields(t, pr.r, "PlayerData", "user:nodriver")
			return f[record.FieldMoveState] == record.MoveCancelled && f[record.FieldMoveTo] == "server-b" &&
				strings.Contains(f[record.FieldMoveWhy], "no-driver") && f["lock.job"] == "server-a"
		})
	})
	t.Run("not alive", func(t *testing.T) {
		p := joinWith(t, da, "user:dead", 4)
		ctx, cancel := context.WithTimeout(ctxT(t), 3*time.Second)
		defer cancel()
		err := p.MoveTo(ctx, "server-gone")
		var re *datadriver.MoveRefusedError
		if !errors.As(err, &re) || re.Reason != datadriver.RefusedNotAlive {
			t.Fatalf("MoveTo a server that never beat: %v, want refused not-alive", err)
		}
		stillLive(t, p, 4)
	})
	t.Run("no answer within the context", func(t *testing.T) {
		// server-c beats presence (alive) but hears nothing: its NATS
		// connection is closed.
		var nc *nats.Conn
		c := newServer(t, pr.r, "server-c", fast, func(cfg *datadriver.NodeConfig) { nc = pr.n.Connect(t); cfg.NATS = nc })
		players(t, c)
		nc.Close()
		p := joinWith(t, da, "user:slow", 5)
		ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
		defer cancel()
		if err := p.MoveTo(ctx, "server-c"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("MoveTo a server that does not answer: %v, want context.DeadlineExceeded", err)
		}
		stillLive(t, p, 5)
	})
	t.Run("to itself", func(t *testing.T) {
		p := joinWith(t, da, "user:self", 6)
		if err := p.MoveTo(ctxT(t), "server-a"); !errors.Is(err, datadriver.ErrMoveRefused) {
			t.Fatalf("MoveTo itself: %v, want ErrMoveRefused", err)
		}
		stillLive(t, p, 6)
	})
}

func TestMoveToAClosingTarget(t *testing.T) {
	mp := newMovePair(t)
	// server-b's Close waits on the release of a profile it holds.
	if _, err := mp.db.Join(ctxT(t), "user:b-holds"); err != nil {
		t.Fatal(err)
	}
	in, proceed := holdFirst(mp.b, func(cmd redis.Cmder) bool { return isWrite(cmd, "release") })
	closed := make(chan error, 1)
	go func() { closed <- mp.b.node.Close(ctxT(t)) }()
	<-in
	<-mp.b.node.Closing()
	p := joinWith(t, mp.da, "user:to-closing", 8)
	err := p.MoveTo(ctxT(t), "server-b")
	var re *datadriver.MoveRefusedError
	if !errors.As(err, &re) || re.Reason != datadriver.RefusedClosing || !errors.Is(err, datadriver.ErrClosing) {
		t.Fatalf("MoveTo a closing server: %v, want refused closing (ErrClosing)", err)
	}
	stillLive(t, p, 8)
	proceed()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestAForgedPrepareHoldsNoJoin(t *testing.T) {
	// A prepare naming a source that does not hold the key (forged, or
	// stale) cannot flip: a join on the target reads the record once and
	// goes on, without waiting out the prepare's window.
	mp := newMovePair(t)
	a := datadriver.PrepareMove(mp.db, "user:forged", datadriver.MovePrepare{ID: "f", From: "server-a", To: "server-b",
		Window: 50 * time.Second, Data: encodedPlayer(t, 999)})
	if !a.Accepted {
		t.Fatalf("prepare: %+v", a)
	}
	start := time.Now()
	q, err := mp.db.Join(ctxT(t), "user:forged")
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the join waited %s behind a prepare that cannot flip", took)
	}
	if c := coins(q); c != 100 {
		t.Fatalf("coins %d: the join took the prepare's data (999) instead of the record's defaults (100)", c)
	}
}
