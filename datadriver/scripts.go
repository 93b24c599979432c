package datadriver

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/save.lua
	saveSrc string
	//go:embed lua/versions.lua
	versionsSrc string
	//go:embed lua/wipe.lua
	wipeSrc string
	//go:embed lua/prepare.lua
	prepareSrc string
)

// scripts are the record's Lua scripts. Each runs with EVALSHA and falls
// back to EVAL when Redis does not have it cached (go-redis Script.Run).
// They are built per Node so that no package-level state is shared.
type scripts struct {
	acquire  *redis.Script
	save     *redis.Script
	versions *redis.Script
	wipe     *redis.Script
	prepare  *redis.Script
}

func newScripts() *scripts {
	return &scripts{
		acquire:  redis.NewScript(acquireSrc),
		save:     redis.NewScript(saveSrc),
		versions: redis.NewScript(versionsSrc),
		wipe:     redis.NewScript(wipeSrc),
		prepare:  redis.NewScript(prepareSrc),
	}
}
