package record

import (
	_ "embed"

	"github.com/ckernel/playerdata/internal/rscript"
)

// The names of the record's scripts, as a Catalog reports them.
const (
	ScriptAcquire  = "acquire"
	ScriptSave     = "save"
	ScriptPrepare  = "prepare"
	ScriptVersions = "versions"
	ScriptWipe     = "wipe"
	ScriptSend     = "send"
	ScriptReplay   = "replay"
	ScriptRepair   = "repair"
	ScriptFree     = "free"
	// ScriptFlip is move.lua: a move's lease flip.
	ScriptFlip = "flip"
	// ScriptMoveState is movestate.lua: what a move reads of the record.
	ScriptMoveState = "movestate"
	// ScriptMoveMark is movemark.lua: a cancelled move as the last move.
	ScriptMoveMark = "movemark"
	// ScriptDrainHold is drainhold.lua: a drain's headroom reservation.
	ScriptDrainHold = "drainhold"
	// ScriptClaim is claim.lua: an idempotency key's namespace-wide claim.
	ScriptClaim = "claim"
)

var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/save.lua
	saveSrc string
	//go:embed lua/prepare.lua
	prepareSrc string
	//go:embed lua/versions.lua
	versionsSrc string
	//go:embed lua/wipe.lua
	wipeSrc string
	//go:embed lua/send.lua
	sendSrc string
	//go:embed lua/replay.lua
	replaySrc string
	//go:embed lua/repair.lua
	repairSrc string
	//go:embed lua/free.lua
	freeSrc string
	//go:embed lua/move.lua
	moveSrc string
	//go:embed lua/movestate.lua
	moveStateSrc string
	//go:embed lua/movemark.lua
	moveMarkSrc string
	//go:embed lua/drainhold.lua
	drainHoldSrc string
	//go:embed lua/claim.lua
	claimSrc string
)

// The scripts are immutable values shared by every client.
var (
	acquireScript   = typed(ScriptAcquire, acquireSrc, ParseAcquireArgs, ParseAcquire)
	saveScript      = typed(ScriptSave, saveSrc, ParseSaveArgs, ParseSave)
	prepareScript   = typed(ScriptPrepare, prepareSrc, ParsePrepareArgs, ParsePrepare)
	sendScript      = typed(ScriptSend, sendSrc, parseSendCall, ParseSend)
	versionsScript  = typed(ScriptVersions, versionsSrc, ParseVersionsArgs, parseVersions)
	wipeScript      = typed(ScriptWipe, wipeSrc, parseWipeArgs, parseWipe)
	repairScript    = typed(ScriptRepair, repairSrc, ParseRepairArgs, ParseRepair)
	freeScript      = typed(ScriptFree, freeSrc, ParseFreeArgs, ParseFree)
	replayScript    = typed(ScriptReplay, replaySrc, ParseReplayArgs, parseReplay)
	moveScript      = typed(ScriptFlip, moveSrc, ParseMoveArgs, ParseMove)
	moveStateScript = typed(ScriptMoveState, moveStateSrc, parseMoveStateArgs, parseMoveState)
	moveMarkScript  = typed(ScriptMoveMark, moveMarkSrc, ParseMoveMarkArgs, parseMoveMark)
	drainHoldScript = typed(ScriptDrainHold, drainHoldSrc, ParseDrainHoldArgs, parseDrainHold)
	claimScript     = typed(ScriptClaim, claimSrc, ParseClaimArgs, ParseClaim)
)

// wire is an arguments struct of a record script: its KEYS for a key and
// its ARGV.
type wire interface {
	keys(key string) []string
	argv() []any
}

// typed is the script src under name with its protocol: A's KEYS and ARGV,
// parse reading an observed call back, answer reading its answer.
func typed[A wire, R any](name, src string, parse func([]string) (A, error), answer func(any) (R, error)) *rscript.Typed[A, R] {
	return rscript.NewTyped(name, expandLua(src), rscript.Protocol[A, R]{
		Keys:   func(a A, key string) []string { return a.keys(key) },
		Args:   func(a A) []any { return a.argv() },
		Parse:  parse,
		Answer: answer,
	})
}

// Scripts lists the record's scripts (for an rscript.Catalog).
func Scripts() []*rscript.Script {
	return []*rscript.Script{acquireScript.Script, saveScript.Script, prepareScript.Script, versionsScript.Script, wipeScript.Script,
		sendScript.Script, replayScript.Script, repairScript.Script, freeScript.Script, moveScript.Script, moveStateScript.Script,
		moveMarkScript.Script, drainHoldScript.Script, claimScript.Script}
}
