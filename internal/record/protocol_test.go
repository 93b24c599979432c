package record

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// wireOf is what one typed script does with a's ARGV: written, read back by
// its parser, and written again.
type wireOf interface {
	wire() (first, again []string, err error)
}

type roundTrip[A, R any] struct {
	s interface {
		Wire(A) []string
		ParseArgs([]string) (A, error)
	}
	a A
}

func (r roundTrip[A, R]) wire() ([]string, []string, error) {
	first := r.s.Wire(r.a)
	back, err := r.s.ParseArgs(first)
	if err != nil {
		return first, nil, err
	}
	return first, r.s.Wire(back), nil
}

// TestEveryScriptsArgumentsReadBack: for each typed script, its parser
// reads back every argument its writer wrote (written again, the ARGV is
// the same), so the writer and the parser never count from different bases.
func TestEveryScriptsArgumentsReadBack(t *testing.T) {
	keep := SaveArgs{Mode: ModeSave, Token: "tok", Data: []byte("data-2"), Schema: 3, SchemaMin: 2, Sum: "1,2,abcd",
		History: 24, HistoryEvery: time.Hour, KeepVer: 7, KeepAlways: true,
		Keep: KeptValue{Head: []byte("head"), Body: []byte("body")}, KeepMeta: KeptMeta{At: time.UnixMilli(1700000000000), Schema: 3, SchemaMin: 2}}
	cases := []struct {
		name string
		rt   wireOf
	}{
		{"acquire", roundTrip[AcquireArgs, AcquireResult]{s: acquireScript, a: AcquireArgs{Job: "a", Token: "t", Presence: true,
			MaxAge: 2 * time.Second, Skew: time.Second, Format: Format, Schema: 3, MaxMessages: 10, MaxMessageBytes: 1 << 16,
			MessagesPerRead: 64}}},
		{"acquire-steal", roundTrip[AcquireArgs, AcquireResult]{s: acquireScript, a: AcquireArgs{Job: "a", Token: "t",
			MaxAge: time.Second, Format: Format, MessagesPerRead: 1, StealJob: "b", StealToken: "old"}}},
		{"save-bare", roundTrip[SaveArgs, SaveResult]{s: saveScript, a: SaveArgs{Mode: ModeRelease, Token: "tok"}}},
		{"save-all", roundTrip[SaveArgs, SaveResult]{s: saveScript, a: SaveArgs{Mode: ModeSettle, Seq: 9, Token: "tok",
			Data: []byte("x"), Schema: 1, SchemaMin: 1, Sum: "s", Meta: &Meta{UserIDs: []byte("u"), Meta: []byte("m")},
			Trade: "tr", Earlier: []string{"e1", "e2"}, Job: "a", Presence: true, MaxAttempts: 5,
			Refused: []Refusal{{ID: "1-1", Err: "no"}}, Applied: []string{"1-0", "1-2"}}}},
		{"save-keep", roundTrip[SaveArgs, SaveResult]{s: saveScript, a: keep}},
		{"save-keep-chunked-plan", roundTrip[SaveArgs, SaveResult]{s: saveScript, a: func() SaveArgs {
			a := keep
			a.Keep = KeptValue{Head: []byte(strings.Repeat("w", 2*HistChunk+5))}
			a.KeepPlan = &HistoryPlan{Seen: "1700000000000", RewriteVer: 6,
				Rewrite: KeptValue{Head: []byte("h6"), Body: []byte("delta")}, Drop: []string{"k1", "k1.1"}}
			return a
		}()}},
		{"prepare", roundTrip[PrepareArgs, PrepareResult]{s: prepareScript, a: PrepareArgs{Token: "t", Trade: "tr", Ver: 42}}},
		{"free", roundTrip[FreeArgs, FreeResult]{s: freeScript, a: FreeArgs{Token: "t", Job: "a", MaxAge: 3 * time.Second}}},
		{"wipe", roundTrip[WipeArgs, bool]{s: wipeScript, a: WipeArgs{Tokens: []string{"t", "earlier"}}}},
		{"repair", roundTrip[RepairArgs, RepairResult]{s: repairScript, a: RepairArgs{DryRun: true, Force: true,
			Skew: time.Second, FlagToken: "t", Aside: ":corrupt:1"}}},
		{"move", roundTrip[MoveArgs, MoveResult]{s: moveScript, a: MoveArgs{Token: "t", Expiry: time.UnixMilli(1700000005000),
			To: "b", ToToken: "bt", ToPresence: true, ID: "m1", From: "a", Data: []byte("d"), Schema: 2, SchemaMin: 1, Sum: "s",
			Meta: &Meta{UserIDs: []byte("u"), Meta: []byte("m")}, Applied: []string{"1-0"}}}},
		{"move-bare", roundTrip[MoveArgs, MoveResult]{s: moveScript, a: MoveArgs{Token: "t", Expiry: time.UnixMilli(1),
			To: "b", ToToken: "bt", ID: "m1", From: "a"}}},
		{"send", roundTrip[sendCall, SendResult]{s: sendScript, a: sendCall{body: []byte("gift"), args: SendArgs{MaxInbox: 100,
			IdempotencyKey: "order-1", IdempotencyWindow: time.Hour, IdempotencyKeys: 1000}}}},
		{"claim", roundTrip[ClaimArgs, ClaimResult]{s: claimScript, a: ClaimArgs{Driver: "PlayerData", Key: "user:1",
			Digest: BodyDigest([]byte("gift")), Window: time.Hour}}},
		{"movestate", roundTrip[moveStateArgs, MoveState]{s: moveStateScript, a: moveStateArgs{}}},
		{"versions", roundTrip[VersionsArgs, versionsAnswer]{s: versionsScript, a: VersionsArgs{}}},
		{"versions-newest", roundTrip[VersionsArgs, versionsAnswer]{s: versionsScript, a: VersionsArgs{WithNewest: true}}},
		{"movemark", roundTrip[MoveMark, bool]{s: moveMarkScript, a: MoveMark{Token: "t", ID: "m1", State: MoveCancelled,
			From: "a", To: "b", Why: "refused (no-driver): the target runs no driver of this name"}}},
		{"drainhold", roundTrip[DrainHoldArgs, map[string]int]{s: drainHoldScript, a: DrainHoldArgs{Drainer: "a",
			TTL: 30 * time.Second, N: 2000, Peers: []PeerLoad{{JobID: "b", Sessions: 10}, {JobID: "c", Sessions: 0}}}}},
		{"replay", roundTrip[ReplayArgs, ReplayResult]{s: replayScript, a: ReplayArgs{IDs: []string{"1-0", "2-0"}}}},
		{"replay-all", roundTrip[ReplayArgs, ReplayResult]{s: replayScript, a: ReplayArgs{}}},
		{"drainhold-retire", roundTrip[DrainHoldArgs, map[string]int]{s: drainHoldScript, a: DrainHoldArgs{Drainer: "a"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			first, again, err := c.rt.wire()
			if err != nil {
				t.Fatalf("the parser refused the writer's ARGV %q: %v", first, err)
			}
			if !slices.Equal(first, again) {
				t.Errorf("read back and written again, the ARGV changed:\n first %q\n again %q", first, again)
			}
		})
	}
}
