package testsupport

import (
	"github.com/ckernel/playerdata/internal/scriptcatalog"
	"github.com/redis/go-redis/v9"
)

// Invocation is one call of one of the project's Lua scripts, as a command
// carries it.
type Invocation struct {
	// Script is the script's name: record.ScriptSave, presencescript.NameBeat,
	// tradescript.NameMove and so on.
	Script string
	// Keys and Args are its KEYS and ARGV.
	Keys, Args []string
}

// Identify tells which of the project's scripts an EVALSHA or EVAL command
// runs, by the script's SHA (never by the shape of its arguments); false for
// any other command. Decode the arguments with the owning package's parser
// (record.ParseSaveArgs and the like).
func Identify(cmd redis.Cmder) (Invocation, bool) {
	in, ok := scriptcatalog.Identify(cmd)
	if !ok {
		return Invocation{}, false
	}
	return Invocation{Script: in.Name(), Keys: in.Keys, Args: in.Args}, true
}
