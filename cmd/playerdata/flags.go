package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Environment variables read when the matching flag is not given.
const (
	envRedis = "REDIS_URL"
	envNATS  = "NATS_URL"
)

// command is one subcommand's flag set and help text.
type command struct {
	name  string
	fs    *flag.FlagSet
	usage string // the synopsis and flags, printed for --help and mistakes
}

// newCommand returns a flag set that reports errors to us instead of
// printing them.
func newCommand(name, usage string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &command{name: name, fs: fs, usage: usage}
}

// parse parses args, flags and positional arguments in any order ("--" ends
// the flags). --help prints the usage to stdout and answers flag.ErrHelp; a
// mistake answers a one-line error naming it (help only when asked).
func (c *command) parse(args []string, stdout io.Writer) ([]string, error) {
	var positional []string
	for {
		err := c.fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, c.usage)
			return nil, flag.ErrHelp
		}
		if err != nil {
			return nil, c.mistake("%s", err)
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// mistake returns the one line to report for a wrong command line, with
// where the help is: a usageError, so the program exits with status 2.
func (c *command) mistake(format string, a ...any) error {
	return usagef("%s: %s (see playerdata help %s)", c.name, fmt.Sprintf(format, a...), c.name)
}

// connFlags are the flags that say where Redis and NATS are and which
// namespace to use.
type connFlags struct {
	redisURL  string
	natsURL   string
	namespace string
}

// addRedis adds --redis and --namespace.
func (f *connFlags) addRedis(fs *flag.FlagSet) {
	fs.StringVar(&f.redisURL, "redis", "", "")
	fs.StringVar(&f.namespace, "namespace", "", "")
}

// addNATS adds --nats.
func (f *connFlags) addNATS(fs *flag.FlagSet) {
	fs.StringVar(&f.natsURL, "nats", "", "")
}

// fromEnv fills the URLs not given as flags from REDIS_URL and NATS_URL.
func (f *connFlags) fromEnv() {
	if f.redisURL == "" {
		f.redisURL = os.Getenv(envRedis)
	}
	if f.natsURL == "" {
		f.natsURL = os.Getenv(envNATS)
	}
}

// ms converts a duration to milliseconds, with two decimals kept.
func ms(d time.Duration) float64 {
	return float64(d.Round(10*time.Microsecond)) / float64(time.Millisecond)
}

// msDuration converts milliseconds (as the reports keep them) back to a
// duration.
func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// human formats a duration for people: "0.84 ms", "312 ms", "3.75 s".
func human(d time.Duration) string {
	switch a := d.Abs(); {
	case a < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", ms(d))
	case a < time.Second:
		return fmt.Sprintf("%.0f ms", ms(d))
	case a < 100*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}
