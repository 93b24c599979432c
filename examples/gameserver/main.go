// Command gameserver is a complete playerdata game server to copy from:
// players join and leave on a timer, one gift is sent to a player, and
// SIGTERM (or Ctrl-C) drains the server: every player is kicked, every
// profile saved and released, then the process exits 0.
//
// With no flags it starts an embedded Redis (miniredis) and NATS server in
// the process, so it runs anywhere:
//
//	go run ./examples/gameserver
//
// Against real servers (several copies with different --job share the
// players, and a player who moves is handed over at once):
//
//	go run ./examples/gameserver --redis redis://localhost:6379 --nats nats://localhost:4222 --job a
//
// What the game does is printed on stdout; the library's log goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "gameserver:", err)
		}
		os.Exit(1)
	}
}

// errUsage: the command line was wrong; the flag package has said why.
var errUsage = errors.New("usage")

// config is the command line.
type config struct {
	redisURL, natsURL string // "": embedded
	job, namespace    string
	players           int           // distinct players
	every             time.Duration // a player joins this often
	stay              time.Duration // and leaves this long after joining
	drain             time.Duration // bound of Node.Close on SIGTERM
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gameserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL (redis://host:6379/0); empty: an embedded miniredis")
	fs.StringVar(&c.natsURL, "nats", "", "NATS URL (nats://host:4222); empty: an embedded nats-server")
	fs.StringVar(&c.job, "job", "", "JobID, unique among live servers (empty: a random one)")
	fs.StringVar(&c.namespace, "namespace", "example", "prefix of every Redis key and NATS subject")
	fs.IntVar(&c.players, "players", 4, "how many players take turns")
	fs.DurationVar(&c.every, "every", time.Second, "a player joins this often")
	fs.DurationVar(&c.stay, "stay", 3*time.Second, "a player leaves this long after joining")
	fs.DurationVar(&c.drain, "drain", 20*time.Second, "bound of the drain on SIGTERM (the grace period less a margin)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "gameserver: unexpected argument %q\n", fs.Arg(0))
		return c, errUsage
	case c.players < 1 || c.every <= 0 || c.stay <= 0 || c.drain <= 0:
		fmt.Fprintln(stderr, "gameserver: --players, --every, --stay and --drain must be positive")
		return c, errUsage
	}
	return c, nil
}

// run is the whole server: it returns once ctx ends and the drain is over,
// or when start-up fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	conns, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conns.close()
	out := newPrinter(stdout)
	out.say("gameserver: Redis %s, NATS %s, namespace %q", conns.redisDesc, conns.natsDesc, cfg.namespace)
	g, err := newGame(ctx, cfg, conns, out, log)
	if err != nil {
		return err
	}
	g.play(ctx)
	return g.drain(cfg.drain)
}
