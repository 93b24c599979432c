// Command playerdata shows the library at work and lets an operator look at
// what it stores.
//
//	playerdata demo      the four handoff cases, on embedded or real Redis and NATS
//	playerdata inspect   one profile record: lock holder, lock age, presence, versions
//	playerdata presence  every server in the presence hash: last beat, alive or stopped
//
// Everything happens in run, which tests call in-process; main only maps its
// error to exit status 1 with one line on stderr.
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
  playerdata inspect  --driver NAME [--redis URL] [--namespace NS] [--presence-ttl D] [--json] KEY
  playerdata presence [--redis URL] [--namespace NS] [--presence-ttl D] [--json]
  playerdata help

Commands:
  demo      play the four ways a player reaches server B while server A holds
            their lock, with two real Nodes, on an embedded Redis and NATS
            unless --redis / --nats (or REDIS_URL / NATS_URL) name real ones
  inspect   show one profile record: lock holder, token prefix, lock age,
            presence flag, whether the holder is alive now, epoch, ver,
            pending trade, kept versions
  presence  list every server in the presence hash: last beat, alive/stopped

Run "playerdata <command> --help" for a command's flags.
`

func main() {
	// go-redis logs every failed dial on stderr; the command reports the
	// failure itself, in one line.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "playerdata: "+oneLine(err.Error()))
		os.Exit(1)
	}
}

// run runs the command named by args[0] with the rest of args, writing its
// output to stdout and usage text to stderr. ctx cancels it. The returned
// error is the one line main prints; nil means exit status 0.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "demo":
		err = runDemo(ctx, rest, stdout, stderr)
	case "inspect":
		err = runInspect(ctx, rest, stdout, stderr)
	case "presence":
		err = runPresence(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil // the command printed its help
	}
	return err
}

// quietLogger drops go-redis's own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// oneLine folds a multi-line error (errors.Join) into one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
