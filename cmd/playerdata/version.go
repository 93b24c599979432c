package main

// playerdata version: which build is running, for a bug report or to tell
// two operators' tools apart.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

const versionUsage = `Usage: playerdata version [--json]

Prints the module's version (a tagged version when installed with "go install
...@vX", "(devel)" when built from a checkout), the VCS revision, its time and
whether the checkout had uncommitted changes (when the build recorded them:
"go build" in a checkout does, "go run" and tests do not), and the Go version.

Flags:
  --json    print one JSON object
`

// buildReport is what version prints, and its --json output.
type buildReport struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Go       string `json:"go"`
	VCS      string `json:"vcs,omitempty"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

// runVersion is "playerdata version".
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("version", versionUsage)
	asJSON := cmd.fs.Bool("json", false, "")
	pos, err := cmd.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cmd.mistake("unexpected argument %q", pos[0])
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("version: this binary carries no build information")
	}
	rep := buildVersion(info)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintln(stdout, rep.String())
	return nil
}

// buildVersion reads a buildReport from the build information.
func buildVersion(info *debug.BuildInfo) buildReport {
	rep := buildReport{Module: info.Main.Path, Version: info.Main.Version, Go: info.GoVersion}
	if rep.Module == "" {
		rep.Module = info.Path // a test binary names no main module version
	}
	if rep.Version == "" {
		rep.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs":
			rep.VCS = s.Value
		case "vcs.revision":
			rep.Revision = s.Value
		case "vcs.time":
			rep.Time = s.Value
		case "vcs.modified":
			rep.Modified = s.Value == "true"
		}
	}
	return rep
}

// String is the one line version prints: "github.com/ckernel/playerdata
// (devel) git <revision> 2025-01-02T03:04:05Z (modified), go1.26.8".
func (v buildReport) String() string {
	parts := []string{v.Module, v.Version}
	if v.Revision != "" {
		vcs := v.VCS + " " + v.Revision
		if v.Time != "" {
			vcs += " " + v.Time
		}
		if v.Modified {
			vcs += " (modified)"
		}
		parts = append(parts, vcs)
	} else {
		parts = append(parts, "no VCS information")
	}
	return strings.Join(parts, " ") + ", " + v.Go
}
