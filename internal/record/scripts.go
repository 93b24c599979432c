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
	// ScriptDrainHold is drainhold.lua: a drain's headroom reservation.
	ScriptDrainHold = "drainhold"
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
	//go:embed lua/drainhold.lua
	drainHoldSrc string
)

// The scripts are immutable values shared by every client.
var (
	acquireScript   = rscript.New(ScriptAcquire, acquireSrc)
	saveScript      = rscript.New(ScriptSave, saveSrc)
	prepareScript   = rscript.New(ScriptPrepare, prepareSrc)
	versionsScript  = rscript.New(ScriptVersions, versionsSrc)
	wipeScript      = rscript.New(ScriptWipe, wipeSrc)
	sendScript      = rscript.New(ScriptSend, sendSrc)
	replayScript    = rscript.New(ScriptReplay, replaySrc)
	repairScript    = rscript.New(ScriptRepair, repairSrc)
	freeScript      = rscript.New(ScriptFree, freeSrc)
	moveScript      = rscript.New(ScriptFlip, moveSrc)
	moveStateScript = rscript.New(ScriptMoveState, moveStateSrc)
	drainHoldScript = rscript.New(ScriptDrainHold, drainHoldSrc)
)

// Scripts lists the record's scripts (for an rscript.Catalog).
func Scripts() []*rscript.Script {
	return []*rscript.Script{acquireScript, saveScript, prepareScript, versionsScript, wipeScript, sendScript, replayScript, repairScript,
		freeScript, moveScript, moveStateScript, drainHoldScript}
}
