package testsupport

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrSharedRedis is what a client of the shared Redis (REDIS_URL) answers,
// without sending it, for a command that changes what every test using that
// server shares: its script cache, its data beyond a test's namespace, its
// configuration, its statistics, its clients.
var ErrSharedRedis = errors.New("testsupport: refused on the shared Redis (REDIS_URL), which every " +
	"package's tests use at once; give this test its own with StartOwnRedis")

// sharedGuard is the hook of every client of the shared Redis: CI runs every
// package's tests against one server at once, so one test's SCRIPT FLUSH
// made another's EVALSHA answer NOSCRIPT and its count of script calls
// wrong (a trade test's crash after four writes crashed the commit).
type sharedGuard struct{}

// sharedOnly reports whether cmd would change what the shared server's
// other users see.
func sharedOnly(cmd redis.Cmder) bool {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(fmt.Sprint(args[1]))
	}
	switch name {
	case "flushall", "flushdb", "shutdown", "debug", "failover", "replicaof", "slaveof":
		return true
	case "script":
		return sub == "flush" || sub == "kill"
	case "function":
		return sub == "flush" || sub == "delete" || sub == "kill"
	case "config":
		return sub == "set" || sub == "resetstat" || sub == "rewrite"
	case "client":
		return sub == "kill" || sub == "pause"
	}
	return false
}

// refusal is the error that refuses cmd on the shared Redis, nil for a
// command it lets through.
func refusal(cmd redis.Cmder) error {
	if !sharedOnly(cmd) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrSharedRedis, strings.ToUpper(cmd.Name()))
}

func (sharedGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (sharedGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := refusal(cmd); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (sharedGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if err := refusal(cmd); err != nil {
				for _, c := range cmds {
					c.SetErr(err)
				}
				return err
			}
		}
		return next(ctx, cmds)
	}
}
