// Package rscript runs several Lua scripts in one round trip: a pipeline of
// EVALSHA calls, with the calls that answered NOSCRIPT (a restarted or
// flushed Redis) sent again as EVAL. go-redis's Script.Run does this for one
// call; a pipeline learns of NOSCRIPT only after it has run.
package rscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// Run sends calls in one pipeline and returns each call's answer and error,
// in order. Calls that answered NOSCRIPT did not run; they are sent again,
// in order, in a second pipeline with EVAL. An error of the pipeline as a
// whole (a broken connection) is the error of every call it did not answer.
func Run(ctx context.Context, rdb redis.UniversalClient, calls []Call) ([]any, []error) {
	vals, errs := make([]any, len(calls)), make([]error, len(calls))
	if len(calls) == 0 {
		return vals, errs
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.Script.EvalSha(ctx, p, c.Keys, c.Args...)
		}
		return nil
	})
	var retry []int
	for i, cmd := range cmds {
		vals[i], errs[i] = cmd.Result()
		if redis.HasErrorPrefix(errs[i], "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return vals, errs
	}
	again := make([]*redis.Cmd, len(retry))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range retry {
			again[j] = calls[i].Script.Eval(ctx, p, calls[i].Keys, calls[i].Args...)
		}
		return nil
	})
	for j, i := range retry {
		vals[i], errs[i] = again[j].Result()
	}
	return vals, errs
}
