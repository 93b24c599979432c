// Command playerdata shows the library at work and lets an operator look at
// what it stores, free a crashed server's lock, send a profile a message and
// restore a profile's kept version.
//
//	playerdata demo      the four handoff cases, on embedded or real Redis and NATS
//	playerdata inspect   one profile record: lock holder, lock age, presence, versions, data
//	playerdata presence  every server in the presence hash: last beat, alive or stopped
//	playerdata locks     the locks one server holds (a bounded SCAN)
//	playerdata where     which server holds a profile, since when, and whether it is alive
//	playerdata unlock    free one lock whose holder reads stopped or unknown
//	playerdata send      send a message to a profile (Driver.Send)
//	playerdata restore   put back a kept version of a profile (Driver.RestoreAt)
//	playerdata replay    move dead-lettered messages back to a profile's inbox
//	playerdata version   the build: module version, VCS revision, Go version
//	playerdata bench     runs playerdata-bench (cmd/playerdata-bench), the lab's measurements
//	playerdata help      the general help, or one command's
//
// Everything happens in run, which tests call in-process; main only maps its
// error to an exit status (see exitStatus) with one line on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// usage is the top-level help.
const usage = `playerdata: player profiles under a session lock, handed over between servers.

Usage:
  playerdata demo     [--redis URL] [--nats URL] [--namespace PREFIX] [--speed N] [--case NAME] [--json] [-v]
  playerdata inspect  --driver NAME [--data] [reader flags] KEY
  playerdata presence [reader flags]
  playerdata locks    --job ID [--driver NAME] [--limit N] [reader flags]
  playerdata where    --driver NAME [reader flags] KEY...
  playerdata unlock   [--driver NAME] [--dry-run] [lock rule flags] [reader flags] KEY
  playerdata send     --driver NAME [--nats URL] [--idempotency-key K] [--max-inbox N] [--allow-new] [reader flags] KEY BODY_JSON
  playerdata restore  --driver NAME --at TIME [--dry-run] [--nats URL] [--wait D] [reader flags] KEY
  playerdata replay   --driver NAME [--dry-run] [reader flags] KEY (ID... | --all)
  playerdata repair   --driver NAME [--force] [--dry-run] [--nats URL] [--wait D] [lock rule flags] [reader flags] KEY
  playerdata version  [--json]
  playerdata bench    [flags of playerdata-bench]
  playerdata help     [COMMAND]

Redis: one Redis, Redis Cluster (the plain URL of any node) or Sentinel
(redis://sentinel:26379?master_name=NAME, or a Sentinel's plain URL).

Reader flags (inspect, presence, locks, where, unlock, send, restore, replay, repair):
  --redis URL  --namespace NS  --presence-key NAME  --presence-shards N
  --presence-ttl D  --json
Lock rule flags (unlock, repair): the servers' --beat D  --lock-ttl D  --lock-skew D

Commands:
  demo      play the four ways a player reaches server B while server A holds
            their lock, with two real Nodes, on an embedded Redis and NATS
            unless --redis / --nats (or REDIS_URL / NATS_URL) name real ones
  inspect   show one profile record: lock holder, token prefix, lock age,
            presence flag, whether the holder is alive now, epoch, ver,
            pending trade, messages waiting, refused and dead-lettered,
            kept versions; --data prints the data as JSON
  presence  list every server in the presence hash: last beat, alive/stopped
  locks     list the locks one server holds: key, driver, lock age,
            presence flag, epoch (a bounded SCAN of the records)
  where     say which server holds each KEY, since when, and whether that
            server is alive now: one sentence per key
  unlock    free one lock, only when the library's lock rule says it may
            change hands (its holder proven stopped: about one Beat; by age
            without the presence flag): one fenced call that changes nothing
            if the lock changed hands meanwhile; an unknown holder is refused
  send      send a message to a profile (a gift, a grant): BODY_JSON encoded
            with msgpack into its inbox; the server holding it applies it at
            once when told over --nats, else at its next autosave or pull
  restore   put back the data a profile had at TIME (RFC 3339, or -2h) from
            its kept versions, under its lock like any load; repairs a
            record whose data does not decode; --dry-run shows the version
  replay    move dead-lettered messages of a profile back to its inbox, in
            one script call (once what made OnMessage refuse them is mended)
  repair    put right what another tool broke in a record (a field that is
            not an integer, a broken lock mended in place with its holder
            kept, a key of the wrong type renamed aside; with --force a lock
            naming no holder once no live server holds it): nothing deleted
  version   print the module version, VCS revision and Go version
  bench     run playerdata-bench, the lab's measurements (a command of its
            own, so that this one links no plotting nor baselines)
  help      print this help, or a command's: playerdata help COMMAND

Exit status: 0 done (or nothing to do), 1 failed or refused, 2 usage (a wrong
command line, or a namespace or driver that holds nothing) or
nothing found (send and restore: no record of KEY; restore: no kept version
at or before TIME).

Run "playerdata help COMMAND" or "playerdata COMMAND --help" for a command's flags.
`

// helpUsage is help's own help.
const helpUsage = `Usage: playerdata help [COMMAND]

Prints the general help, or the help of COMMAND (demo, inspect, presence,
locks, where, unlock, send, restore, replay, bench, version, help) with its flags.
`

// subcommand is one entry of the command table.
type subcommand struct {
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the command table; help is answered by run itself.
var commands = map[string]subcommand{
	"demo":     {demoUsage, runDemo},
	"inspect":  {inspectUsage, runInspect},
	"presence": {presenceUsage, runPresence},
	"locks":    {locksUsage, runLocks},
	"where":    {whereUsage, runWhere},
	"unlock":   {unlockUsage, runUnlock},
	"send":     {sendUsage, runSend},
	"restore":  {restoreUsage, runRestore},
	"replay":   {replayUsage, runReplay},
	"repair":   {repairUsage, runRepair},
	"bench":    {benchUsage, runBench},
	"version":  {versionUsage, runVersion},
}

func main() {
	// go-redis logs every failed dial on stderr; the command reports the
	// failure itself, in one line.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var child *childExit
	if err != nil && !errors.As(err, &child) { // a child printed its own
		fmt.Fprintln(os.Stderr, "playerdata: "+oneLine(err.Error()))
	}
	os.Exit(exitStatus(err))
}

// run runs the command named by args[0] with the rest of args, writing its
// output to stdout and usage text to stderr. ctx cancels it. The returned
// error is the one line main prints; nil means exit status 0, a usageError
// status 2, any other error status 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		return runHelp(rest, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q (see playerdata help)", name)
	}
	err := cmd.run(ctx, rest, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the command printed its help
	}
	return err
}

// runHelp is "playerdata help [COMMAND]".
func runHelp(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage)
		return nil
	case len(args) > 1:
		return usagef("help: one COMMAND only, got %d (see playerdata help help)", len(args))
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		fmt.Fprint(stdout, helpUsage)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usagef("help: unknown command %q (see playerdata help)", args[0])
	}
	fmt.Fprint(stdout, cmd.usage)
	return nil
}

// quietLogger drops go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// oneLine folds a multi-line error (errors.Join) into one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
