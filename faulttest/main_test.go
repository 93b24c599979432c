//go:build linux

package faulttest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binEnv names the gameserver binary the tests start, cliEnv the
// playerdata program an operator runs. TestMain builds them into a
// temporary directory unless the variables are already set.
const (
	binEnv = "PLAYERDATA_GAMESERVER"
	cliEnv = "PLAYERDATA_CLI"
)

// defaultParallel is how many scenarios run at once unless -test.parallel
// says otherwise: they spend most of their time waiting on timers (presence
// expiry, outages), not on the CPU, so more than GOMAXPROCS fit.
const defaultParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	if os.Getenv(binEnv) != "" && os.Getenv(cliEnv) != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "playerdata-gameserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	// Without -race even when the tests run with it: the gameserver is the
	// system under test, and its timings should be a real server's.
	for _, b := range []struct{ env, name, pkg string }{
		{binEnv, "gameserver", "./gameserver"}, {cliEnv, "playerdata", "../cmd/playerdata"},
	} {
		if os.Getenv(b.env) != "" {
			continue
		}
		bin := filepath.Join(dir, b.name)
		build := exec.Command("go", "build", "-o", bin, b.pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "faulttest: build %s: %v\n", b.name, err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
		_ = os.Setenv(b.env, bin)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
