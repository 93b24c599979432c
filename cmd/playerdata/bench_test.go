package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/bench"
	"github.com/ckernel/playerdata/testsupport"
)

// TestBenchQuickJSON runs "bench --quick --json --report" on testsupport's
// Redis and NATS and checks the JSON holds every field with sane values
// (bench.CheckJSON: positive figures, ordered percentiles, consistent
// ratios; no timing bound).
func TestBenchQuickJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("bench --quick runs for about 20 s")
	}
	t.Setenv(envRedis, "")
	t.Setenv(envNATS, "")
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	url := "redis://" + r.Addr
	if r.Kind == testsupport.KindEnv {
		url = os.Getenv("REDIS_URL") // StartRedis used it: so do we
	}
	dir := t.TempDir()
	res := runArgs(t, 3*time.Minute, "bench", "--quick", "--json", "--redis", url, "--nats", n.URL,
		"--namespace", r.Namespace, "--report", dir)
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
	t.Setenv(envRedis, "")
	t.Setenv(envNATS, "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an argument", []string{"bench", "extra"}, `unexpected argument "extra"`},
		{"bad namespace", []string{"bench", "--namespace", "a.b"}, `--namespace "a.b"`},
		{"unknown flag", []string{"bench", "--rounds", "3"}, "flag provided but not defined: -rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runArgs(t, 5*time.Second, tc.args...)
			if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || exitStatus(r.err) != exitUsage {
				t.Fatalf("run(%q) = %v (status %d), want a usage error containing %q", tc.args, r.err, exitStatus(r.err), tc.want)
			}
			if !strings.Contains(r.stderr, "Usage: playerdata bench") {
				t.Fatalf("run(%q) printed no usage:\n%s", tc.args, r.stderr)
			}
		})
	}
}
