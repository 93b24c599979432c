package record

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClaimKey is the namespace-wide claim of idempotency key k of namespace ns
// ("<ns>:idem.claim:<k>"; "idem.claim:<k>" without a namespace): a hash
// naming the driver, profile key and body digest of the send that made it,
// expiring after the idempotency window. It is not in any record's slot.
func ClaimKey(ns, k string) string {
	if ns == "" {
		return "idem.claim:" + k
	}
	return ns + ":idem.claim:" + k
}

// ClaimOutcome is what a claim of an idempotency key found.
type ClaimOutcome int

const (
	// Claimed: the key was free; it names the caller's driver and profile
	// key now, for the window.
	Claimed ClaimOutcome = iota + 1
	// SameTarget: the key names the caller's driver and profile key
	// already (a retry, or another body for the same profile): the
	// profile's send decides.
	SameTarget
	// ClaimedByOther: the key names a message of another profile or
	// driver (ClaimResult.Driver, Key); nothing was written.
	ClaimedByOther
	// ClaimCorrupt: the claim is not what this library writes
	// (ClaimResult.Why); nothing was written.
	ClaimCorrupt
)

// ClaimArgs are the arguments of claim.lua.
type ClaimArgs struct {
	// Driver and Key name the profile the keyed message is sent to.
	Driver, Key string
	// Digest is the message body's digest (BodyDigest).
	Digest string
	// Window is how long the claim lasts (at least 1 ms), on the Redis
	// clock, from the send that makes it.
	Window time.Duration
}

// ClaimResult is claim.lua's answer.
type ClaimResult struct {
	Outcome ClaimOutcome
	// Driver, Key and Digest: whom a ClaimedByOther key names, and the
	// digest of the body it was claimed with.
	Driver, Key, Digest string
	// Why says what is wrong with a ClaimCorrupt claim.
	Why string
}

// keys are KEYS of claim.lua for the claim at claimKey.
func (a ClaimArgs) keys(claimKey string) []string { return []string{claimKey} }

// argv is ARGV of claim.lua.
func (a ClaimArgs) argv() []any {
	return []any{a.Driver, a.Key, a.Digest, max(1, a.Window.Milliseconds())}
}

// ParseClaimArgs reads the ARGV of an observed claim.lua call.
func ParseClaimArgs(argv []string) (ClaimArgs, error) {
	if err := wantArgs(ScriptClaim, argv, 4); err != nil {
		return ClaimArgs{}, err
	}
	ms, err := strconv.ParseInt(arg(argv, 4), 10, 64)
	if err != nil {
		return ClaimArgs{}, fmt.Errorf("record: %s window %q: %w", ScriptClaim, arg(argv, 4), err)
	}
	return ClaimArgs{Driver: arg(argv, 1), Key: arg(argv, 2), Digest: arg(argv, 3), Window: time.Duration(ms) * time.Millisecond},
		nil
}

// Claim claims idempotency key k of namespace ns for the message a names,
// before send.lua stores it in the profile's inbox: one round trip
// (claim.lua), on the claim's own slot.
func Claim(ctx context.Context, rdb redis.Scripter, ns, k string, a ClaimArgs) (ClaimResult, error) {
	return claimScript.Run(ctx, rdb, ClaimKey(ns, k), a)
}

// ParseClaim reads claim.lua's answer.
func ParseClaim(v any) (ClaimResult, error) {
	arr, tag, err := tagged(v)
	if err != nil {
		return ClaimResult{}, err
	}
	switch tag {
	case "CLAIMED":
		return ClaimResult{Outcome: Claimed}, nil
	case "SAME":
		return ClaimResult{Outcome: SameTarget}, nil
	case "OTHER":
		return ClaimResult{Outcome: ClaimedByOther, Driver: str(elem(arr, 1)), Key: str(elem(arr, 2)),
			Digest: str(elem(arr, 3))}, nil
	case "CORRUPT":
		return ClaimResult{Outcome: ClaimCorrupt, Why: str(elem(arr, 1))}, nil
	}
	return ClaimResult{}, fmt.Errorf("%w: claim answered %q", ErrUnexpectedAnswer, tag)
}
