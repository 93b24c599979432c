package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Machine is where the run ran: the facts its figures depend on.
type Machine struct {
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	// RedisVersion and NATSVersion are what the servers report (INFO
	// server's redis_version; the NATS server's INFO); "" when unknown.
	RedisVersion string `json:"redis_version"`
	RedisMode    string `json:"redis_mode"`
	NATSVersion  string `json:"nats_version"`
	// EmbeddedRedis and EmbeddedNATS: the server ran inside this process
	// (miniredis, an in-process nats-server): not representative.
	EmbeddedRedis bool `json:"embedded_redis"`
	EmbeddedNATS  bool `json:"embedded_nats"`
	// RedisStats: the server reported INFO cpu and commandstats.
	RedisStats bool `json:"redis_stats"`
	// RedisMemory: the server answered MEMORY USAGE (Redis bytes per record).
	RedisMemory bool `json:"redis_memory"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute load
	// averages at the start and the end.
	LoadBefore string    `json:"load_before"`
	LoadAfter  string    `json:"load_after"`
	StartedAt  time.Time `json:"started_at"`
	DurationS  float64   `json:"duration_s"`
}

// machine gathers the facts of this machine and of the servers.
func (r *runner) machine(ctx context.Context) Machine {
	m := Machine{
		Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: cpuModel(),
		GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		EmbeddedRedis: r.env.EmbeddedRedis, EmbeddedNATS: r.env.EmbeddedNATS, RedisStats: r.stats, RedisMemory: r.mem,
		LoadBefore: loadAverage(), StartedAt: time.Now().UTC().Truncate(time.Second),
	}
	if info, err := r.admin.Info(ctx, "server").Result(); err == nil {
		f := infoFields(info)
		m.RedisVersion, m.RedisMode = f["redis_version"], f["redis_mode"]
	}
	if m.RedisVersion == "" && r.env.EmbeddedRedis {
		m.RedisVersion = "miniredis"
	}
	if nc, err := nats.Connect(r.env.NATSURL, nats.Name("playerdata bench probe")); err == nil {
		m.NATSVersion = nc.ConnectedServerVersion()
		nc.Close()
	}
	return m
}

// cpuModel is the first "model name" of /proc/cpuinfo, "" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1, 5 and 15 minute load averages ("0.42 0.60 0.71"),
// "" where /proc/loadavg does not exist.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// busy reports the 1-minute load average of loadavg (loadAverage's form)
// and whether it is over half the cores: a machine busy with other work.
func busy(loadavg string, cores int) (float64, bool) {
	f := strings.Fields(loadavg)
	if len(f) == 0 {
		return 0, false
	}
	load, err := strconv.ParseFloat(f[0], 64)
	return load, err == nil && load > float64(cores)/2
}
