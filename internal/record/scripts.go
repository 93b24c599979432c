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
	acquireScript = rscript.NewTyped(ScriptAcquire, acquireSrc, rscript.Protocol[AcquireArgs, AcquireResult]{
		Keys: AcquireArgs.keys, Args: AcquireArgs.argv, Parse: ParseAcquireArgs, Answer: ParseAcquire})
	saveScript = rscript.NewTyped(ScriptSave, saveSrc, rscript.Protocol[SaveArgs, SaveResult]{
		Keys: SaveArgs.keys, Args: SaveArgs.argv, Parse: ParseSaveArgs, Answer: ParseSave})
	prepareScript = rscript.NewTyped(ScriptPrepare, prepareSrc, rscript.Protocol[PrepareArgs, PrepareResult]{
		Keys: PrepareArgs.keys, Args: PrepareArgs.argv, Parse: ParsePrepareArgs, Answer: ParsePrepare})
	sendScript = rscript.NewTyped(ScriptSend, sendSrc, rscript.Protocol[sendCall, SendResult]{
		Keys: sendCall.keys, Args: sendCall.argv, Parse: parseSendCall, Answer: ParseSend})
	versionsScript = rscript.New(ScriptVersions, versionsSrc)
	wipeScript     = rscript.NewTyped(ScriptWipe, wipeSrc, rscript.Protocol[WipeArgs, bool]{
		Keys: WipeArgs.keys, Args: WipeArgs.argv, Parse: parseWipeArgs, Answer: parseWipe})
	repairScript = rscript.NewTyped(ScriptRepair, repairSrc, rscript.Protocol[RepairArgs, RepairResult]{
		Keys: RepairArgs.keys, Args: RepairArgs.argv, Parse: ParseRepairArgs, Answer: ParseRepair})
	freeScript = rscript.NewTyped(ScriptFree, freeSrc, rscript.Protocol[FreeArgs, FreeResult]{
		Keys: FreeArgs.keys, Args: FreeArgs.argv, Parse: ParseFreeArgs, Answer: ParseFree})
	replayScript = rscript.New(ScriptReplay, replaySrc)
	moveScript   = rscript.NewTyped(ScriptFlip, moveSrc, rscript.Protocol[MoveArgs, MoveResult]{
		Keys: MoveArgs.keys, Args: MoveArgs.argv, Parse: ParseMoveArgs, Answer: ParseMove})
	moveStateScript = rscript.New(ScriptMoveState, moveStateSrc)
	moveMarkScript  = rscript.New(ScriptMoveMark, moveMarkSrc)
	drainHoldScript = rscript.New(ScriptDrainHold, drainHoldSrc)
	claimScript     = rscript.NewTyped(ScriptClaim, claimSrc, rscript.Protocol[ClaimArgs, ClaimResult]{
		Keys: ClaimArgs.keys, Args: ClaimArgs.argv, Parse: ParseClaimArgs, Answer: ParseClaim})
)

// Scripts lists the record's scripts (for an rscript.Catalog).
func Scripts() []*rscript.Script {
	return []*rscript.Script{acquireScript.Script, saveScript.Script, prepareScript.Script, versionsScript, wipeScript.Script,
		sendScript.Script, replayScript, repairScript.Script, freeScript.Script, moveScript.Script, moveStateScript, moveMarkScript,
		drainHoldScript, claimScript.Script}
}
