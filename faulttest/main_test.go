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

// binEnv names the gameserver binary the tests start. TestMain builds it
// into a temporary directory unless the variable is already set.
const binEnv = "PLAYERDATA_GAMESERVER"

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
	if os.Getenv(binEnv) != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "playerdata-gameserver-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "gameserver")
	// Without -race even when the tests run with it: the gameserver is the
	// system under test, and its timings should be a real server's.
	build := exec.Command("go", "build", "-o", bin, "./gameserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "faulttest: build the gameserver:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	_ = os.Setenv(binEnv, bin)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
