// Package rscript runs the project's Lua scripts: each is a named [Script]
// (EVALSHA, falling back to EVAL when Redis has not cached it), several can
// run in one round trip ([Run]: a pipeline whose NOSCRIPT answers are sent
// again as EVAL), and a [Catalog] tells which script a command observed on
// the wire is, by its SHA, so that tests and the simulation find a script by
// name and never by the shape of its arguments.
package rscript

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Script is a named Lua script. It is immutable: package-level Scripts are
// shared by every client.
type Script struct {
	name string
	s    *redis.Script
	// hash and src are the SHA and the source as command arguments, boxed
	// once: a call does not allocate them again.
	hash, src any
}

// New returns the script src under name (a short word, unique in a Catalog).
func New(name, src string) *Script {
	s := redis.NewScript(src)
	return &Script{name: name, s: s, hash: s.Hash(), src: src}
}

// Name is the script's name.
func (s *Script) Name() string { return s.name }

// Hash is the SHA1 of the script's source, as EVALSHA names it.
func (s *Script) Hash() string { return s.s.Hash() }

// Load loads the script into rdb's script cache (SCRIPT LOAD), so that the
// next EVALSHA finds it.
func (s *Script) Load(ctx context.Context, rdb redis.Scripter) error { return s.s.Load(ctx, rdb).Err() }

// The command names, boxed once.
var (
	evalSHAName any = "evalsha"
	evalName    any = "eval"
)

// processor is what runs a command: every go-redis client, pipeline and
// transaction.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// cmd is the EVALSHA (or, with eval, EVAL) command of a call, built in one
// allocation of its arguments (go-redis's Script copies them twice).
func (s *Script) cmd(ctx context.Context, eval bool, keys []string, args []any) *redis.Cmd {
	a := make([]any, firstKeyArg, firstKeyArg+len(keys)+len(args))
	a[0], a[1], a[2] = evalSHAName, s.hash, len(keys)
	if eval {
		a[0], a[1] = evalName, s.src
	}
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(firstKeyArg) // where a Redis Cluster client finds the slot
	}
	return cmd
}

// firstKeyArg is where a script call's keys start in its arguments
// (EVALSHA sha numkeys key ...).
const firstKeyArg = 3

// firstKey is the first key of a script call cmd made, or "" (no keys, or
// another command).
func firstKey(c redis.Cmder) string {
	a := c.Args()
	if len(a) <= firstKeyArg {
		return ""
	}
	if n, ok := a[firstKeyArg-1].(int); !ok || n < 1 {
		return ""
	}
	key, _ := a[firstKeyArg].(string)
	return key
}

// noScript reports whether Redis answered that it does not know the script.
func noScript(err error) bool {
	return err != nil && (err == redis.ErrNoScript || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// Run runs the script once: EVALSHA, then EVAL when Redis answers NOSCRIPT.
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	p, ok := rdb.(processor)
	if !ok {
		// Copies, so that keys and args do not escape on the common path.
		return s.s.Run(ctx, rdb, append([]string(nil), keys...), append([]any(nil), args...)...)
	}
	cmd := s.cmd(ctx, false, keys, args)
	_ = p.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		cmd = s.cmd(ctx, true, keys, args)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// Call is one script call, to run alone or in a pipeline.
type Call struct {
	Script *Script
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
			cmds[i] = c.Script.cmd(ctx, false, c.Keys, c.Args)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	var retry []int
	for i, cmd := range cmds {
		vals[i], errs[i] = cmd.Result()
		if noScript(errs[i]) {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return vals, errs
	}
	again := make([]*redis.Cmd, len(retry))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range retry {
			again[j] = calls[i].Script.cmd(ctx, true, calls[i].Keys, calls[i].Args)
			_ = p.Process(ctx, again[j])
		}
		return nil
	})
	for j, i := range retry {
		vals[i], errs[i] = again[j].Result()
	}
	return vals, errs
}

// Invocation is one script call seen on the wire: which script, its KEYS and
// its ARGV as strings.
type Invocation struct {
	Script *Script
	Keys   []string
	Args   []string
}

// Name is the invoked script's name.
func (in Invocation) Name() string { return in.Script.name }

// Catalog knows scripts by their SHA. Build it once with NewCatalog; it is
// read only afterwards.
type Catalog struct {
	bySHA map[string]*Script
}

// NewCatalog returns a catalog of scripts.
func NewCatalog(scripts ...*Script) *Catalog {
	c := &Catalog{bySHA: make(map[string]*Script, len(scripts))}
	for _, s := range scripts {
		c.bySHA[s.Hash()] = s
	}
	return c
}

// Identify tells which script of the catalog an EVALSHA or EVAL command
// runs, with its keys and arguments; false for any other command or script.
func (c *Catalog) Identify(cmd redis.Cmder) (Invocation, bool) {
	args := cmd.Args()
	if len(args) < 3 {
		return Invocation{}, false
	}
	var s *Script
	switch strings.ToLower(cmd.Name()) {
	case "evalsha":
		s = c.bySHA[fmt.Sprint(args[1])]
	case "eval":
		s = c.bySHA[redis.NewScript(str(args[1])).Hash()]
	}
	if s == nil {
		return Invocation{}, false
	}
	var numKeys int
	if _, err := fmt.Sscan(fmt.Sprint(args[2]), &numKeys); err != nil || numKeys < 0 || 3+numKeys > len(args) {
		return Invocation{}, false
	}
	in := Invocation{Script: s}
	for _, k := range args[3 : 3+numKeys] {
		in.Keys = append(in.Keys, str(k))
	}
	for _, a := range args[3+numKeys:] {
		in.Args = append(in.Args, str(a))
	}
	return in, true
}

// str is a command argument as the script sees it.
func str(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// RunWait runs c, then WAIT replicas timeout on the same connection (WAIT
// counts the replicas that acknowledged the writes of its own connection),
// in one pipeline: one round trip, or two when Redis answered NOSCRIPT (the
// second sends EVAL and WAIT again). It returns the script's answer and
// error, and how many replicas acknowledged (0 when the script failed). On a
// Redis Cluster the connection is one to the master of c's first key.
func RunWait(ctx context.Context, rdb redis.UniversalClient, c Call, replicas int, timeout time.Duration) (any, int64, error) {
	conn := redis.Cmdable(rdb)
	if cc, ok := rdb.(*redis.ClusterClient); ok && len(c.Keys) > 0 {
		master, err := cc.MasterForKey(ctx, c.Keys[0])
		if err != nil {
			return nil, 0, err
		}
		conn = master
	}
	run := func(eval bool) (*redis.Cmd, *redis.Cmd) {
		var cmd, wait *redis.Cmd
		_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = c.Script.cmd(ctx, eval, c.Keys, c.Args)
			_ = p.Process(ctx, cmd)
			wait = p.Do(ctx, "WAIT", replicas, timeout.Milliseconds())
			return nil
		})
		return cmd, wait
	}
	cmd, wait := run(false)
	if noScript(cmd.Err()) {
		cmd, wait = run(true)
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, 0, err
	}
	acked, werr := wait.Int64()
	if werr != nil {
		return v, 0, fmt.Errorf("wait for replicas: %w", werr)
	}
	return v, acked, nil
}
