package datadriver_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// A key names one message of the namespace (issue 33): within
// IdempotencyWindow, a key sent to one profile is refused for any other
// profile key or driver, and nothing is stored there.

// sendTo sends gift{coins} to key from d under idempotency key k.
func sendTo(ctx context.Context, d *datadriver.Driver[wallet], key, k string, coins int) (string, datadriver.SendReceipt,
	error) {
	var rc datadriver.SendReceipt
	id, err := d.Send(ctx, key, gift{Coins: coins}, datadriver.SendOptions{IdempotencyKey: k, Receipt: &rc})
	return id, rc, err
}

// untouched fails unless driver's profile key has no record and no inbox:
// a refused Send stored nothing, not even a record stub.
func untouched(t *testing.T, r *testsupport.Redis, driver, key string) {
	t.Helper()
	rk := record.Key(r.Namespace, driver, key)
	if n, err := r.Client(t).Exists(context.Background(), rk, record.InboxKey(rk), record.IdemKey(rk)).Result(); err != nil ||
		n != 0 {
		t.Fatalf("%s of %s: %d of its record, inbox and keys exist after a refused send (%v), want none", key, driver, n, err)
	}
}

func TestIdempotencyKeyNamesOneMessageOfTheNamespace(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
	mail := giftDriver(t, pr.b, func(c *datadriver.Config[wallet]) { c.Name = "Mailbox" })
	first, _, err := sendTo(ctx, da, "user:1", "order-1", 500)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		d           *datadriver.Driver[wallet]
		driver, key string
		coins       int
		body        string
	}{
		{"another profile key, the same body", db, "PlayerData", "user:2", 500, "the same body"},
		{"another profile key, another body", da, "PlayerData", "user:2", 7, "another body"},
		{"another driver, the same profile key", mail, "Mailbox", "user:1", 500, "the same body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := sendTo(ctx, c.d, c.key, "order-1", c.coins)
			if !errors.Is(err, datadriver.ErrIdempotencyConflict) {
				t.Fatalf("order-1 sent to %s of %s = %v, want ErrIdempotencyConflict", c.key, c.driver, err)
			}
			for _, want := range []string{`"user:1" of driver PlayerData`, c.body, "nothing stored"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the conflict does not say %q: %v", want, err)
				}
			}
			untouched(t, pr.r, c.driver, c.key)
		})
	}
	// The same message retried, from either server, is still one message.
	for _, d := range []*datadriver.Driver[wallet]{da, db} {
		if id, rc, err := sendTo(ctx, d, "user:1", "order-1", 500); err != nil || id != first || !rc.Duplicate {
			t.Fatalf("a retry of order-1 to user:1 = %q, %+v, %v; want a duplicate of %s", id, rc, err, first)
		}
	}
	// Another body for the same profile is still refused by the profile's
	// own memory, naming the first message.
	if _, _, err := sendTo(ctx, db, "user:1", "order-1", 9); !errors.Is(err, datadriver.ErrIdempotencyConflict) ||
		!strings.Contains(err.Error(), first) {
		t.Fatalf("order-1 to user:1 with another body = %v, want ErrIdempotencyConflict naming %s", err, first)
	}
	if n := inboxLen(t, pr.r, "user:1"); n != 1 {
		t.Fatalf("user:1's inbox holds %d messages, want the first alone", n)
	}
	p, err := da.Join(ctx, "user:1")
	if err != nil {
		t.Fatal(err)
	}
	if w := walletOf(p); w.Coins != 500 || w.Received != 1 {
		t.Fatalf("user:1 loaded %+v, want the one gift once", w)
	}
}

// failScriptOnce has s's next call of script fail: before it runs (ran
// false: it never reached Redis) or after it ran (its answer lost). fired
// tells it did.
func failScriptOnce(s *server, script string, ran bool, fired *atomic.Bool) {
	if ran {
		s.faults.SetAfter(func(_ context.Context, cmd redis.Cmder, err error) error {
			if err == nil && isScript(cmd, script) && fired.CompareAndSwap(false, true) {
				return testsupport.ErrInjected
			}
			return err
		})
		return
	}
	s.faults.SetBefore(func(_ context.Context, cmd redis.Cmder) error {
		if isScript(cmd, script) && fired.CompareAndSwap(false, true) {
			return testsupport.ErrInjected
		}
		return nil
	})
}

// A keyed Send that failed anywhere after its claim is retried as before
// the claims existed, from the same server or the other: the retry
// succeeds with exactly one message, and the key stays refused for other
// profiles meanwhile.
func TestKeyedSendRetriedAfterAFailureAfterItsClaim(t *testing.T) {
	cases := []struct {
		name   string
		script string
		ran    bool
		dup    bool // the retry finds the first attempt's message
	}{
		{"the send never reached Redis", record.ScriptSend, false, false},
		{"the send stored, its answer lost", record.ScriptSend, true, true},
		{"the claim made, its answer lost", record.ScriptClaim, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pr := newPair(t)
			ctx := ctxT(t)
			da, db := giftDriver(t, pr.a), giftDriver(t, pr.b)
			var fired atomic.Bool
			failScriptOnce(pr.b, c.script, c.ran, &fired)
			if _, _, err := sendTo(ctx, db, "user:1", "order-1", 500); err == nil || !fired.Load() {
				t.Fatalf("the first attempt = %v (fault ran: %v), want the injected failure", err, fired.Load())
			}
			pr.b.faults.Clear()
			if _, _, err := sendTo(ctx, da, "user:2", "order-1", 500); !errors.Is(err, datadriver.ErrIdempotencyConflict) {
				t.Fatalf("order-1 to user:2 after user:1's failed attempt = %v, want ErrIdempotencyConflict", err)
			}
			untouched(t, pr.r, "PlayerData", "user:2")
			for i, d := range []*datadriver.Driver[wallet]{db, da} { // retried on B, then on A
				_, rc, err := sendTo(ctx, d, "user:1", "order-1", 500)
				if err != nil || rc.Duplicate != (c.dup || i > 0) {
					t.Fatalf("retry %d = %+v, %v; want success, a duplicate: %v", i+1, rc, err, c.dup || i > 0)
				}
			}
			if n := inboxLen(t, pr.r, "user:1"); n != 1 {
				t.Fatalf("user:1's inbox holds %d messages after the retries, want 1", n)
			}
		})
	}
}

// Past IdempotencyWindow (on the Redis clock) the claim is gone: the key
// is free for another profile, which then holds it for its own window, so
// a late retry to the first profile is refused.
func TestIdempotencyKeyFreeForAnotherProfilePastTheWindow(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	window := func(c *datadriver.Config[wallet]) { c.IdempotencyWindow = 300 * time.Millisecond }
	da := giftDriver(t, pr.a, window)
	if _, _, err := sendTo(ctx, da, "user:1", "order-1", 500); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sendTo(ctx, da, "user:2", "order-1", 500); !errors.Is(err, datadriver.ErrIdempotencyConflict) {
		t.Fatalf("order-1 to user:2 inside the window = %v, want ErrIdempotencyConflict", err)
	}
	time.Sleep(500 * time.Millisecond) // past the window on the Redis clock, with a margin
	if _, rc, err := sendTo(ctx, da, "user:2", "order-1", 500); err != nil || rc.Duplicate {
		t.Fatalf("order-1 to user:2 past the window = %+v, %v; want a new message", rc, err)
	}
	if n := inboxLen(t, pr.r, "user:2"); n != 1 {
		t.Fatalf("user:2's inbox holds %d messages, want 1", n)
	}
	if _, _, err := sendTo(ctx, da, "user:1", "order-1", 500); !errors.Is(err, datadriver.ErrIdempotencyConflict) ||
		!strings.Contains(err.Error(), `"user:2"`) {
		t.Fatalf("order-1 to user:1 once user:2 claimed it = %v, want ErrIdempotencyConflict naming user:2", err)
	}
	if n := inboxLen(t, pr.r, "user:1"); n != 1 {
		t.Fatalf("user:1's inbox holds %d messages, want its first alone", n)
	}
}

// A claim that is not what the library writes refuses the keyed Send with
// ErrCorruptRecord naming the claim; nothing is stored or overwritten.
func TestCorruptIdempotencyClaim(t *testing.T) {
	pr := newPair(t)
	ctx := ctxT(t)
	da := giftDriver(t, pr.a)
	claim := record.ClaimKey(pr.r.Namespace, "order-1")
	if err := pr.r.Client(t).Set(ctx, claim, "not a claim", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err := sendTo(ctx, da, "user:1", "order-1", 500)
	if !errors.Is(err, datadriver.ErrCorruptRecord) || !strings.Contains(err.Error(), claim) {
		t.Fatalf("a keyed send over a corrupt claim = %v, want ErrCorruptRecord naming %s", err, claim)
	}
	untouched(t, pr.r, "PlayerData", "user:1")
	if v, err := pr.r.Client(t).Get(ctx, claim).Result(); err != nil || v != "not a claim" {
		t.Fatalf("the claim is now %q (%v): overwritten", v, err)
	}
}
