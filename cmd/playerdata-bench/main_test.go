package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/bench"
	"github.com/ckernel/playerdata/testsupport"
)

// TestBenchQuickJSON runs "bench --quick --json --report --compare" on
// testsupport's Redis and NATS and checks the JSON holds every field with
// sane values (bench.CheckJSON: positive figures, ordered percentiles,
// consistent ratios; no timing bound), and the comparison went to stderr.
func TestBenchQuickJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("bench --quick runs for about 20 s")
	}
	t.Setenv("REDIS_URL", "")
	t.Setenv("NATS_URL", "")
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	url := "redis://" + r.Addr
	if r.Kind == testsupport.KindEnv {
		url = os.Getenv("REDIS_URL") // StartRedis used it: so do we
	}
	dir := t.TempDir()
	res := runArgs(t, 3*time.Minute, "--quick", "--json", "--redis", url, "--nats", n.URL,
		"--namespace", r.Namespace, "--report", dir, "--compare", filepath.Join("..", "..", "docs", "bench", "reference.json"))
	if res.err != nil {
		t.Fatalf("bench --quick --json: %v\nstderr:\n%s", res.err, res.stderr)
	}
	if err := bench.CheckJSON([]byte(res.stdout)); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, res.stdout)
	}
	var got struct {
		Quick   bool `json:"quick"`
		Machine struct {
			EmbeddedRedis bool `json:"embedded_redis"`
			EmbeddedNATS  bool `json:"embedded_nats"`
		} `json:"machine"`
		Cycle map[string]any `json:"cycle"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Quick || got.Machine.EmbeddedRedis || got.Machine.EmbeddedNATS {
		t.Errorf("quick %v, embedded Redis %v, embedded NATS %v; want a quick run on the given servers",
			got.Quick, got.Machine.EmbeddedRedis, got.Machine.EmbeddedNATS)
	}
	for _, players := range []string{"1", "8", "64"} {
		if got.Cycle[players] == nil {
			t.Errorf("cycle has no %s players", players)
		}
	}
	if !strings.Contains(res.stderr, "Ratios, reference") { // stdout holds the JSON alone
		t.Errorf("--compare printed no comparison on stderr:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "NOT representative") {
		t.Errorf("bench warned of embedded servers while given real ones:\n%s", res.stderr)
	}
	for _, f := range []string{bench.ReportHTML, bench.ReportJSON, bench.ChartThroughput, bench.ChartHandoff} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("--report wrote no %s: %v", f, err)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	t.Setenv("REDIS_URL", "")
	t.Setenv("NATS_URL", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an argument", []string{"extra"}, `unexpected argument "extra"`},
		{"bad namespace", []string{"--namespace", "a.b"}, `--namespace "a.b"`},
		{"unknown flag", []string{"--rounds", "3"}, "flag provided but not defined: -rounds"},
		{"a result without a reference", []string{"--result", "now.json"}, "give --compare too"},
		{"compare with the big history", []string{"--big-history", "--compare", "ref.json"}, "not with --big-history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 5*time.Second, tc.args...)
			var u *usageError
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || !errors.As(r.err, &u) {
				t.Fatalf("run(%q) = %v, want a usage error containing %q", tc.args, r.err, tc.want)
			}
			if r.stderr != "" || r.stdout != "" {
				t.Fatalf("run(%q) printed more than its one line:\n%s%s", tc.args, r.stdout, r.stderr)
			}
		})
	}
}

// TestBenchCompare: --compare with --result prints the reference's ratios
// beside the result's, without measuring; a reference that is not a
// result is refused before anything runs.
func TestBenchCompare(t *testing.T) {
	ref := filepath.Join("..", "..", "docs", "bench", "reference.json")
	r := runArgs(t, 5*time.Second, "--compare", ref, "--result", ref)
	if r.err != nil {
		t.Fatalf("--compare --result: %v", r.err)
	}
	for _, want := range []string{"Ratios, reference", "cycle.64.vs_redsync", "handoff.p50_vs_floor", "≥ 1.25×",
		"0 ratios worse than the reference"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, r.stdout)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"quick": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runArgs(t, 5*time.Second, "--compare", bad); r.err == nil || !strings.Contains(r.err.Error(), "not a bench result") {
		t.Errorf("--compare of a file that is no result = %v", r.err)
	}
}

func TestBenchHelp(t *testing.T) {
	r := runArgs(t, 5*time.Second, "--help")
	if r.err != nil || !strings.HasPrefix(r.stdout, "Usage: playerdata-bench") {
		t.Fatalf("--help = %v:\n%s", r.err, r.stdout)
	}
}

// result is what run returned and printed.
type result struct {
	stdout, stderr string
	err            error
}

// runArgs runs the command in-process, failing the test after within.
func runArgs(tb testing.TB, within time.Duration, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	if ctx.Err() != nil {
		tb.Fatalf("run(%q) did not end within %s", args, within)
	}
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}
