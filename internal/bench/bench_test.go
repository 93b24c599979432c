package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/testsupport"
)

// tinyConfig is the smallest run whose figures are still sane: a few
// hundred samples each, tenths of a second per round.
func tinyConfig() Config {
	c := QuickConfig()
	c.Rounds, c.RoundTime, c.Warmup = 1, 150*time.Millisecond, 50*time.Millisecond
	c.ScriptCalls, c.Handoffs, c.CrashTrials, c.CrashProfiles = 100, 200, 1, 3
	c.PresenceServers, c.PresenceWindow = 50, time.Second
	c.MemoryRecords, c.HeapProfiles, c.Messages = 10, 400, 200 // 400: a few hundred objects freed by the earlier phases stay under one a profile
	return c
}

// testEnv is an Env on testsupport's Redis and NATS.
func testEnv(t *testing.T) (Env, *testsupport.Redis) {
	t.Helper()
	r, n := testsupport.StartRedis(t), testsupport.StartNATS(t)
	opt := &redis.Options{Addr: r.Addr}
	if url := os.Getenv("REDIS_URL"); r.Kind == testsupport.KindEnv && url != "" {
		var err error
		if opt, err = redis.ParseURL(url); err != nil {
			t.Fatal(err)
		}
	}
	return Env{
		RedisOptions:  func() *redis.Options { o := *opt; return &o },
		NATSURL:       n.URL,
		Namespace:     r.Namespace,
		EmbeddedRedis: r.Kind == testsupport.KindMiniredis,
	}, r
}

func TestRun(t *testing.T) {
	env, r := testEnv(t)
	var progress bytes.Buffer
	env.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, env, tinyConfig())
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckJSON(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}

	// The floor ran beside the others, at every concurrency, and has its
	// ratios.
	names := map[string]bool{}
	for _, x := range res.Ratios {
		names[x.Name] = true
	}
	for _, p := range res.Players() {
		c := res.Cycle[strconv.Itoa(p)]
		if c.FloorOpsS <= 0 || len(c.FloorRounds) == 0 {
			t.Errorf("%d players: no floor (%v cycles/s, rounds %v)", p, c.FloorOpsS, c.FloorRounds)
		}
		for _, n := range []string{"floor_vs_raw", "floor_vs_redsync", "vs_floor"} {
			if name := "cycle." + strconv.Itoa(p) + "." + n; !names[name] {
				t.Errorf("no ratio %s", name)
			}
		}
	}

	// Every key of the run is gone.
	keys, err := r.Client(t).Keys(ctx, r.Namespace+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left after the run: %v %v", keys, err)
	}

	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Session cycle", "ours", "raw", "redsync", "floor/raw", "Handoff", "Crash takeover", "Presence", "Memory", "Messages"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text has no %q:\n%s", want, text.String())
		}
	}

	dir := t.TempDir()
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"index.html", "throughput.svg", "handoff.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("report file %s: %v", f, err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	for _, want := range []string{"throughput.svg", "handoff.svg", res.Machine.GoVersion, "redsync", "ours ÷ floor"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("index.html has no %q", want)
		}
	}
}

func TestConfigRefusesNonsense(t *testing.T) {
	env := Env{RedisOptions: func() *redis.Options { return &redis.Options{} }, NATSURL: "nats://x", Namespace: "ns"}
	for name, tc := range map[string]struct {
		env Env
		cfg Config
	}{
		"negative rounds":  {env, Config{Rounds: -1}},
		"zero players":     {env, Config{Players: []int{1, 0}}},
		"ttl within beats": {env, Config{CrashBeat: time.Second, CrashTTL: time.Second}},
		"tiny data":        {env, Config{CycleDataBytes: 10}},
		"no redis":         {Env{NATSURL: "nats://x", Namespace: "ns"}, Config{}},
		"no nats":          {Env{RedisOptions: env.RedisOptions, Namespace: "ns"}, Config{}},
		"bad namespace":    {Env{RedisOptions: env.RedisOptions, NATSURL: "nats://x", Namespace: "a.b"}, Config{}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Run(context.Background(), tc.env, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Run = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	var s []float64
	for i := 100; i >= 1; i-- {
		s = append(s, float64(i))
	}
	l := summarize(s)
	if l.N != 100 || l.P50MS != 50 || l.P90MS != 90 || l.P99MS != 99 || l.MaxMS != 100 || l.MeanMS != 50.5 {
		t.Fatalf("summarize(1..100) = %+v", l)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("median = %v, want 2.5", m)
	}
	if l := summarize(nil); l.N != 0 {
		t.Fatalf("summarize(nil) = %+v", l)
	}
	if math.IsNaN(ratio(1, 0)) || ratio(1, 0) != 0 {
		t.Fatal("ratio(1, 0) is not 0")
	}
}

func TestNewBlobSize(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{})
	for _, size := range []int{minDataBytes, 512, 1024, 4096} {
		b := newBlob(size, rng)
		enc, err := msgpack.Marshal(&profileData{Coins: 1000, Level: 1, Blob: b})
		if err != nil {
			t.Fatal(err)
		}
		if d := len(enc) - size; d < -2 || d > 2 {
			t.Errorf("newBlob(%d): the profile encodes to %d bytes", size, len(enc))
		}
	}
}

func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		loadavg string
		cores   int
		busy    bool
	}{
		{"0.42 0.60 0.71", 2, false},
		{"1.00 0.60 0.71", 2, false},
		{"1.01 0.60 0.71", 2, true},
		{"7.5 7 7", 16, false},
		{"", 2, false},
		{"x y z", 2, false},
	} {
		if _, got := busy(tc.loadavg, tc.cores); got != tc.busy {
			t.Errorf("busy(%q, %d) = %v, want %v", tc.loadavg, tc.cores, got, tc.busy)
		}
	}
}
