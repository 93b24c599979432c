package rscript

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Protocol is the one definition of how a script is called and answers:
// its KEYS for a key, its ARGV written from the arguments struct A and read
// back from a call seen on the wire, and its answer read into R. Args and
// Parse are a pair, and a test of each script holds them to each other
// (Parse of Wire gives the arguments back), so they cannot count from
// different bases.
type Protocol[A, R any] struct {
	// Keys are the script's KEYS for the record (or other) key.
	Keys func(a A, key string) []string
	// Args are the script's ARGV.
	Args func(a A) []any
	// Parse reads the ARGV of an observed call back (tests, the simulation).
	Parse func(argv []string) (A, error)
	// Answer reads the script's answer.
	Answer func(v any) (R, error)
}

// Typed is a Script with its Protocol: callers run it with an arguments
// struct and get an answer struct, and never pair an encoder with a parser
// by hand.
type Typed[A, R any] struct {
	*Script
	p Protocol[A, R]
}

// NewTyped returns the script src under name, called and answered as p says.
func NewTyped[A, R any](name, src string, p Protocol[A, R]) *Typed[A, R] {
	return &Typed[A, R]{Script: New(name, src), p: p}
}

// Run runs the script once for key (EVALSHA, then EVAL on NOSCRIPT) and
// reads its answer.
func (t *Typed[A, R]) Run(ctx context.Context, rdb redis.Scripter, key string, a A) (R, error) {
	v, err := t.Script.Run(ctx, rdb, t.p.Keys(a, key), t.p.Args(a)...).Result()
	if err != nil {
		var zero R
		return zero, err
	}
	return t.p.Answer(v)
}

// RunOrReload runs the script once for key, as Run does; when Redis does
// not know the script (NOSCRIPT: a restarted or failed-over Redis, or
// SCRIPT FLUSH), reload may change the arguments of the EVAL that follows
// (presence makes that beat a full check: whatever forgot the script may
// have forgotten the data too). It answers the arguments that ran.
func (t *Typed[A, R]) RunOrReload(ctx context.Context, rdb redis.Scripter, key string, a A, reload func(*A)) (R, A, error) {
	var zero R
	p, ok := rdb.(processor)
	if !ok {
		return zero, a, fmt.Errorf("rscript: %s: %T cannot process commands", t.name, rdb)
	}
	cmd := t.cmd(ctx, false, t.p.Keys(a, key), t.p.Args(a))
	_ = p.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		reload(&a)
		cmd = t.cmd(ctx, true, t.p.Keys(a, key), t.p.Args(a))
		_ = p.Process(ctx, cmd)
	}
	v, err := cmd.Result()
	if err != nil {
		return zero, a, err
	}
	r, err := t.p.Answer(v)
	return r, a, err
}

// Call is the script's call for key, to run in a pipeline (Run), with the
// reader of its answer.
func (t *Typed[A, R]) Call(key string, a A) Pending[R] {
	return Pending[R]{Call: Call{Script: t.Script, Keys: t.p.Keys(a, key), Args: t.p.Args(a)}, answer: t.p.Answer}
}

// ParseArgs reads the ARGV of an observed call of the script.
func (t *Typed[A, R]) ParseArgs(argv []string) (A, error) { return t.p.Parse(argv) }

// Answer reads an answer of the script.
func (t *Typed[A, R]) Answer(v any) (R, error) { return t.p.Answer(v) }

// Wire is a's ARGV as the script receives it: each argument as a string.
func (t *Typed[A, R]) Wire(a A) []string {
	args := t.p.Args(a)
	out := make([]string, len(args))
	for i, v := range args {
		out[i] = wireArg(v)
	}
	return out
}

// wireArg is an argument as go-redis writes it to Redis.
func wireArg(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Pending is one typed call made for a pipeline: its untyped Call, and the
// reader of its answer.
type Pending[R any] struct {
	Call   Call
	answer func(any) (R, error)
}

// Answer reads the call's answer from what Run gave for it.
func (p Pending[R]) Answer(v any, err error) (R, error) {
	if err != nil {
		var zero R
		return zero, err
	}
	return p.answer(v)
}
