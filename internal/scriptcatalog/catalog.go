// Package scriptcatalog knows every Lua script of the project by its SHA, so
// that hooks in tests, the simulation and the program's demo find a script
// call by the script's name, never by the shape of its arguments.
package scriptcatalog

import (
	"github.com/ckernel/playerdata/internal/presencescript"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/rscript"
	"github.com/ckernel/playerdata/internal/tradescript"
	"github.com/redis/go-redis/v9"
)

// all is built once and only read.
var all = rscript.NewCatalog(append(append(record.Scripts(), presencescript.All()...), tradescript.All()...)...)

// Identify tells which of the project's scripts an EVALSHA or EVAL command
// runs, with its keys and arguments; false for any other command.
func Identify(cmd redis.Cmder) (rscript.Invocation, bool) { return all.Identify(cmd) }
