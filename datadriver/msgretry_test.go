package datadriver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// Row 6: a message OnMessage refuses while its player is online is tried
// again on its own, with no other message and no save asked for: after
// MaxMessageAttempts refusals it is a dead letter, and the holder's WARN
// names it, its refusals and the reason.
func TestRefusedMessageIsRetriedUntilDeadLettered(t *testing.T) {
	ctx := ctxT(t)
	pr, _, da, db := fussyPair(t, func(c *datadriver.Config[wallet]) {
		c.MaxMessageAttempts, c.Autosave = 3, 50*time.Millisecond
	})
	if _, err := da.Join(ctx, "user:1"); err != nil {
		t.Fatal(err)
	}
	id, err := db.Send(ctx, "user:1", gift{Coins: 5}, datadriver.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
	var dead []record.DeadLetter
	eventually(t, 10*time.Second, "the refused message dead-lettered by the holder's retries", func() bool {
		dead, _ = record.ReadDeadLetters(ctx, pr.r.Client(t), rk, 10)
		return len(dead) == 1
	})
	if d := dead[0]; d.MessageID != id || d.Attempts != 3 || d.Err != "the shop is closed" {
		t.Fatalf("dead letter %+v, want %s after 3 refusals", d, id)
	}
	// The holder logs once its write's answer is back, which may be just
	// after another client sees the dead letter.
	for _, want := range []string{
		`level=WARN msg="OnMessage refused a message; it stays in the inbox and is tried again" job=server-a ` +
			`driver=PlayerData key=user:1 id=` + id + ` attempts=1 err="the shop is closed"`,
		`level=WARN msg="OnMessage refused a message MaxMessageAttempts times: it moved to the dead letters`,
	} {
		eventually(t, 5*time.Second, "the holder's log to say "+want, func() bool {
			return strings.Contains(pr.a.logs.String(), want)
		})
	}
}

// Row 6, mended: a refused message applies on its own once OnMessage
// accepts it again, without another message or a save asked for.
func TestRefusedMessageAppliesOnceMended(t *testing.T) {
	ctx := ctxT(t)
	pr, refuse, da, db := fussyPair(t, func(c *datadriver.Config[wallet]) {
		c.MaxMessageAttempts, c.Autosave = 100, 50*time.Millisecond
	})
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.Send(ctx, "user:1", gift{Coins: 5}, datadriver.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
	admin := pr.r.Client(t)
	eventually(t, 10*time.Second, "the message refused, then tried again", func() bool {
		n, _ := admin.HGet(ctx, record.TriesKey(rk), id).Int()
		return n >= 2
	})
	refuse.Store(false)
	received(t, p, 1, "A")
	eventually(t, 5*time.Second, "the applied message saved", func() bool { return inboxLen(t, pr.r, "user:1") == 0 })
}

// The operator's replay of a message waiting in the inbox drops its
// refusal count (its next refusal counts as the first, so it is not
// dead-lettered at once) and has the holder pull at its next save, which
// applies it once OnMessage is mended. The holder's own retry is an hour
// away here: only the replay brings the message back.
func TestReplayOfAWaitingMessageStartsItsRefusalsOver(t *testing.T) {
	ctx := ctxT(t)
	pr, refuse, da, db := fussyPair(t, func(c *datadriver.Config[wallet]) {
		c.MaxMessageAttempts, c.Autosave = 2, time.Hour
	})
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.Send(ctx, "user:1", gift{Coins: 5}, datadriver.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rk := record.Key(pr.r.Namespace, "PlayerData", "user:1")
	admin := pr.r.Client(t)
	tries := func() int { n, _ := admin.HGet(ctx, record.TriesKey(rk), id).Int(); return n }
	eventually(t, 5*time.Second, "the refusal counted", func() bool { return tries() == 1 })
	if rep, err := record.Replay(ctx, admin, rk, []string{id}); err != nil || rep.Retried != 1 || rep.Moved != 0 {
		t.Fatalf("replay of the waiting message = %+v, %v", rep, err)
	}
	if n := tries(); n != 0 {
		t.Fatalf("%d refusals counted after the replay, want them dropped", n)
	}
	if err := p.Save(ctx); err != nil { // learns the inbox changed: pulls, and is refused again
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the refusal after the replay counted", func() bool { return tries() == 1 })
	if d, _ := record.ReadDeadLetters(ctx, admin, rk, 10); len(d) != 0 {
		t.Fatalf("dead letters %+v after 1 + 1 refusals with MaxMessageAttempts 2: the replay did not start them over", d)
	}
	refuse.Store(false)
	if _, err := record.Replay(ctx, admin, rk, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(ctx); err != nil {
		t.Fatal(err)
	}
	received(t, p, 1, "A")
}

// virtualPair is two Nodes on one miniredis and the in-process bus, inside
// a synctest bubble: time is virtual, for Redis TIME too.
func virtualPair(t *testing.T) (a, b *datadriver.Node) {
	mr := miniredis.NewMiniRedis()
	t.Cleanup(mr.Close)
	bus := testsupport.NewMemBus(nil)
	t.Cleanup(bus.Close)
	node := func(job string) *datadriver.Node {
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0",
			Dialer: func(context.Context, string, string) (net.Conn, error) { return mr.Dial() }})
		n, err := datadriver.NewNode(context.Background(), datadriver.NodeConfig{JobID: job, Redis: rdb,
			Bus: bus.Endpoint(job), Namespace: "v", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()); _ = rdb.Close() })
		return n
	}
	return node("server-a"), node("server-b")
}

// A poison message costs its holder one retry per autosave period at
// first, backing off to one per 8 periods, and with the defaults
// (MaxMessageAttempts 5, Autosave 30 s) reaches the dead letters about 15
// periods after its first refusal, on virtual time.
func TestRefusedMessageRetryBacksOff(t *testing.T) {
	for _, attempts := range []int{-1, 0} {
		synctest.Test(t, func(t *testing.T) {
			a, b := virtualPair(t)
			var mu sync.Mutex
			var at []time.Time
			cfg := datadriver.Config[wallet]{Name: "PlayerData", MaxMessageAttempts: attempts,
				OnMessage: func(*wallet, datadriver.Message) error {
					mu.Lock()
					defer mu.Unlock()
					at = append(at, time.Now())
					return errors.New("poison")
				}}
			da, err := datadriver.NewDriver(a, cfg)
			if err != nil {
				t.Fatal(err)
			}
			db, _ := datadriver.NewDriver(b, cfg)
			ctx := context.Background()
			if _, err := da.Join(ctx, "user:1"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Send(ctx, "user:1", gift{Coins: 1}, datadriver.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Hour)
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			period := defaults.Autosave
			if attempts == 0 { // the default: 5
				if len(at) != defaults.MaxMessageAttempts {
					t.Fatalf("%d refusals in an hour, want %d then a dead letter", len(at), defaults.MaxMessageAttempts)
				}
				if took := at[len(at)-1].Sub(at[0]); took < 14*period || took > 19*period {
					t.Errorf("dead-lettered %s after the first refusal, want 15 to 19 autosave periods", took)
				}
				return
			}
			for i := 1; i < len(at); i++ {
				gap, want := at[i].Sub(at[i-1]), period<<min(i-1, 3)
				if gap < want*7/8 || gap > want+period {
					t.Errorf("refusal %d came %s after the one before, want %s to %s", i+1, gap, want*7/8, want+period)
				}
			}
			if len(at) < 15 || len(at) > 20 {
				t.Errorf("%d refusals of a poison message in an hour with a 30 s autosave, want 15 to 20", len(at))
			}
		})
	}
}
