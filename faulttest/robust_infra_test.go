//go:build linux

package faulttest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckernel/playerdata/testsupport"
)

// The services a traffic server reaches, and what a network cut cuts.
const (
	toRedis = "redis"
	toNATS  = "nats"
)

// infra is what a robustness run's servers connect to, and how a fault
// reaches them: each server's Redis address and NATS URL (or Sentinel),
// the command that starts it, and the network cut between one server and
// one service.
type infra struct {
	redisAddr   func(job string) string
	natsURL     func(job string) string
	sentinels   string // with master: a failover client instead of redisAddr
	master      string
	minReplicas int
	command     func(job, bin string, args ...string) *exec.Cmd
	// operatorRedis is the Redis URL the operator's verbs use, from outside
	// every cut.
	operatorRedis string
	cut, heal     func(t *testing.T, job, service string, dir testsupport.Direction)
	// variant says how the network runs ("loopback", "network namespaces",
	// "proxy"), and why, for the log.
	variant string

	aof       *testsupport.Redis          // the Redis restart fault's
	steppable *testsupport.SteppableRedis // the clock step fault's
	sentinel  *testsupport.Sentinel       // the promotion fault's
}

// plainCommand runs the server in the test's own namespace.
func plainCommand(_, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// loopbackInfra: every server on addr and one nats-server, on 127.0.0.1.
func loopbackInfra(t *testing.T, addr string) *infra {
	nats := testsupport.StartNATSCluster(t, 1)
	return &infra{
		redisAddr:     func(string) string { return addr },
		natsURL:       func(string) string { return nats.URLs[0] },
		command:       plainCommand,
		variant:       "loopback",
		operatorRedis: "redis://" + addr,
	}
}

// partitionInfra is the network for the partition faults: namespaces when
// this process can make them, else TCP proxies (and the log says so).
func partitionInfra(t *testing.T, jobs []string) *infra {
	err := testsupport.NetLabUsable()
	if os.Getenv("PLAYERDATA_ROBUST_PROXY") != "" {
		err = errProxyForced
	}
	if err != nil {
		t.Logf("robustness: network namespaces unavailable (%v): the proxy variant runs, and a one-way cut is a cut both ways", err)
		return proxyInfra(t, jobs)
	}
	return labInfra(t, jobs)
}

// errProxyForced: PLAYERDATA_ROBUST_PROXY asks for the proxy variant.
var errProxyForced = errors.New("PLAYERDATA_ROBUST_PROXY is set")

// labInfra: Redis and NATS each in a namespace of their own, every server
// in one of its own, all behind a NetLab's hub; a cut drops packets
// between a server and a service, in one direction or both.
func labInfra(t *testing.T, jobs []string) *infra {
	lab := testsupport.NewNetLab(t)
	rns, nns := lab.NewNetNS(t, toRedis), lab.NewNetNS(t, toNATS)
	dir := t.TempDir()
	startService(t, rns, filepath.Join(dir, "redis.log"), "redis-server", "--bind", rns.IP, "--port", "6379",
		"--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", dir)
	startService(t, nns, filepath.Join(dir, "nats.log"), "nats-server", "-a", nns.IP, "-p", "4222")
	waitTCP(t, rns.IP+":6379")
	waitTCP(t, nns.IP+":4222")
	nss := make(map[string]*testsupport.NetNS, len(jobs))
	for _, j := range jobs {
		nss[j] = lab.NewNetNS(t, j)
	}
	ips := map[string]string{toRedis: rns.IP, toNATS: nns.IP}
	return &infra{
		redisAddr: func(string) string { return rns.IP + ":6379" },
		natsURL:   func(string) string { return "nats://" + nns.IP + ":4222" },
		command: func(job, bin string, args ...string) *exec.Cmd {
			return nss[job].Command(bin, args...)
		},
		cut:           func(t *testing.T, job, svc string, d testsupport.Direction) { nss[job].Cut(t, ips[svc], d) },
		heal:          func(t *testing.T, job, svc string, d testsupport.Direction) { nss[job].Heal(t, ips[svc], d) },
		variant:       "network namespaces",
		operatorRedis: "redis://" + rns.IP + ":6379",
	}
}

// startService starts bin in ns, its output in logPath, killed when the
// test ends.
func startService(t *testing.T, ns *testsupport.NetNS, logPath, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := ns.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s in %s: %v", bin, ns.Name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", bin, tail(logPath, logTail))
		}
	})
}

// waitTCP waits until addr accepts connections.
func waitTCP(t *testing.T, addr string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing answers on %s: %v", addr, err)
}

// proxyInfra: a private Redis and NATS on 127.0.0.1, each server reaching
// each through a TCP proxy of its own; a cut blackholes the proxy (both
// ways, whatever the direction asked).
func proxyInfra(t *testing.T, jobs []string) *infra {
	r := testsupport.StartOwnRedis(t)
	nats := testsupport.StartNATSCluster(t, 1)
	natsAddr := strings.TrimPrefix(nats.URLs[0], "nats://")
	var mu sync.Mutex
	pxs := map[string]*testsupport.Proxy{}
	for _, j := range jobs {
		pxs[j+"/"+toRedis] = testsupport.StartProxy(t, r.Addr)
		pxs[j+"/"+toNATS] = testsupport.StartProxy(t, natsAddr)
	}
	px := func(job, svc string) *testsupport.Proxy {
		mu.Lock()
		defer mu.Unlock()
		return pxs[job+"/"+svc]
	}
	return &infra{
		redisAddr:     func(job string) string { return px(job, toRedis).Addr },
		natsURL:       func(job string) string { return "nats://" + px(job, toNATS).Addr },
		command:       plainCommand,
		cut:           func(_ *testing.T, job, svc string, _ testsupport.Direction) { px(job, svc).Blackhole() },
		heal:          func(_ *testing.T, job, svc string, _ testsupport.Direction) { px(job, svc).Heal() },
		variant:       "proxy",
		operatorRedis: "redis://" + r.Addr,
	}
}
