// Command gameserver is a small game server for playerdata's fault tests: one
// datadriver.Node and one Driver[faulttest.Player], a set of keys it joins
// (a bounded number at a time) and plays (an Update every -update, a Save
// every -save), and one JSON line on stdout per event (faulttest.Event).
//
//	gameserver -redis 127.0.0.1:6379 -job a -ns t1 -count 100 -beat 250ms -ttl 1s
//
// With -messages the driver's OnMessage applies faulttest.Gift messages
// (Driver.Send) to the data, one "applied" event each.
//
// With -traffic it plays faulttest.Register profiles instead: -workers
// workers Join, Update, Save, Release and hold random keys among -count,
// recording the call and the return of every operation in -history, for
// the linearizability checker (see faulttest.HistLine). -sentinels and
// -master connect through Sentinel instead of -redis.
//
// Stdin line "dump" (or SIGUSR1) prints every key's state. SIGTERM or
// SIGINT closes the Node (saving and releasing every profile) and exits: 0
// when Close succeeded, 1 otherwise. The library's log goes to stderr.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// Commands: stdin lines, and SIGUSR1 as "dump". The stdin reader lives
	// as long as the process (a read cannot be cancelled); it only sends.
	cmds := make(chan string, 16)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			cmds <- s.Text()
		}
	}()
	go func() {
		for range usr1 {
			cmds <- "dump"
		}
	}()

	if err := run(ctx, os.Args[1:], cmds, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "gameserver:", err)
		}
		os.Exit(1)
	}
}

// errUsage: the flags were wrong; the flag package has said why.
var errUsage = errors.New("usage")

// run is the whole server: it returns when ctx ends (after Node.Close) or
// when start-up fails. cmds carries commands ("dump").
func run(ctx context.Context, args []string, cmds <-chan string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.traffic.on {
		t, err := newTraffic(ctx, cfg, stdout, stderr)
		if err != nil {
			return err
		}
		return t.run(ctx)
	}
	g, err := newGame(ctx, cfg, stdout, stderr)
	if err != nil {
		return err
	}
	return g.run(ctx, cmds)
}
