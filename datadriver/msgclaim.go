package datadriver

import (
	"context"
	"fmt"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// An idempotency key names one message of the namespace, not only of its
// profile. send.lua remembers a key per profile, in the record's slot; on
// Redis Cluster no script can see another profile's keys, so a keyed Send
// first claims its key for the namespace (claim.lua, one more round trip,
// on the claim's own slot): a claim "<ns>:idem.claim:<key>" naming the
// driver, the profile key and the body's digest, expiring
// IdempotencyWindow after it was made, on the Redis clock. A key claimed
// for another driver or profile is refused (ErrIdempotencyConflict,
// nothing stored); one claimed for this very profile goes on to send.lua,
// which decides as it did before (a duplicate, another body, or a first
// Send that claimed and then failed before it stored). So a retry from any
// server, whose first attempt failed anywhere, behaves as without claims.
// Past the window the claim is gone, and the key is free for another
// profile even while the profile that has it still remembers it (its
// message waits or lies dead): the namespace-wide check covers the window.

// claimIdempotencyKey claims o's idempotency key for key's profile of this
// driver before send.lua runs: nil to go on, or why the Send stores
// nothing (counted). A Send without a key claims nothing and pays nothing.
func (d *Driver[T]) claimIdempotencyKey(ctx context.Context, key string, o SendOptions, body []byte) error {
	k := o.IdempotencyKey
	if k == "" {
		return nil
	}
	n := d.node
	digest := record.BodyDigest(body)
	cctx, cancel := n.clock.WithTimeout(ctx, n.cfg.SaveTimeout)
	defer cancel()
	res, err := record.Claim(cctx, n.rdb, n.ns, k, record.ClaimArgs{Driver: d.cfg.Name, Key: key, Digest: digest,
		Window: d.cfg.IdempotencyWindow})
	switch {
	case err != nil:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return fmt.Errorf("send %q: claim idempotency key %q: %w (nothing stored: retry with the same key)", key, k, err)
	case res.Outcome == record.ClaimCorrupt:
		d.tel.MessageSent(ctx, telemetry.SendFailed)
		return &CorruptRecordError{Key: key, Path: record.ClaimKey(n.ns, k), Err: fmt.Errorf("the idempotency key's "+
			"claim is %s; nothing stored (deleting the claim frees the key)", res.Why)}
	case res.Outcome == record.ClaimedByOther:
		d.tel.MessageSent(ctx, telemetry.SendKeyConflict)
		return &IdempotencyConflictError{Key: key, IdempotencyKey: k, Driver: res.Driver, Owner: res.Key,
			SameBody: res.Digest == digest, Window: d.cfg.IdempotencyWindow}
	}
	return nil
}
