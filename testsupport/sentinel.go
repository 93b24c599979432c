package testsupport

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelMaster is the name the sentinels monitor the primary under.
	sentinelMaster = "testsupport"
	// sentinelPromoteWithin bounds KillPrimary's wait for a promotion: the
	// sentinels need DownAfter to call the primary down, then an election
	// and a REPLICAOF NO ONE, about a second more.
	sentinelPromoteWithin = 30 * time.Second
	// defaultSentinelDownAfter is SentinelConfig.DownAfter's default.
	defaultSentinelDownAfter = 500 * time.Millisecond
)

// SentinelConfig shapes [StartSentinel]'s topology. Zero fields take the
// defaults.
type SentinelConfig struct {
	// Replicas is how many replicas follow the primary. default: 1. With
	// two or more, a replica is left to follow the promoted one, so WAIT
	// (NodeConfig.MinReplicas) can still be met after a failover.
	Replicas int
	// Sentinels is how many redis-server --sentinel processes watch the
	// primary; the quorum is a majority of them. default: 1.
	Sentinels int
	// DownAfter is down-after-milliseconds: how long the primary must not
	// answer before a sentinel calls it down. default: 500 ms.
	DownAfter time.Duration
}

// Sentinel is a primary, its replicas and the sentinels that watch them,
// each a redis-server process of its own on 127.0.0.1, for one test. Make
// it with [StartSentinel]. Its methods are safe for concurrent use.
type Sentinel struct {
	// MasterName is the name the sentinels know the primary by.
	MasterName string
	// Addrs are the sentinels' "127.0.0.1:port" addresses.
	Addrs []string
	// Namespace is fresh per call ("t" and 16 hex digits), as StartRedis
	// gives; tests prefix their keys with it (see Key).
	Namespace string

	rr        *ReplicatedRedis // the data processes; its primary follows promotions
	data      []*RedisProcess  // the primary and replicas, in start order
	sentinels []*RedisProcess
	replicas  int
	behind    bool // LoseReplication paused the replicas
}

// StartSentinel starts a primary, cfg.Replicas replicas linked to it (as
// [StartRedisReplicated] does) and cfg.Sentinels sentinels
// (`redis-server <conf> --sentinel`) monitoring it with a majority quorum.
// It returns once every sentinel names the primary and counts every
// replica and every other sentinel. Everything is killed when the test
// ends, and the logs shown when it failed. It skips the test when
// redis-server is not on PATH.
func StartSentinel(tb testing.TB, cfg SentinelConfig) *Sentinel {
	tb.Helper()
	binary := lookPathOrSkip(tb, "redis-server", "StartSentinel")
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Sentinels == 0 {
		cfg.Sentinels = 1
	}
	if cfg.DownAfter == 0 {
		cfg.DownAfter = defaultSentinelDownAfter
	}
	if cfg.Replicas < 0 || cfg.Sentinels < 0 || cfg.DownAfter < 0 {
		tb.Fatalf("testsupport: StartSentinel(%+v): negative field", cfg)
	}
	rr := StartRedisReplicated(tb, cfg.Replicas)
	s := &Sentinel{MasterName: sentinelMaster, Namespace: rr.Namespace, rr: rr, replicas: cfg.Replicas}
	s.data = append(s.data, rr.Primary())
	for i := range cfg.Replicas {
		s.data = append(s.data, rr.Replica(i))
	}
	quorum := cfg.Sentinels/2 + 1
	host, port, _ := net.SplitHostPort(rr.Primary().Addr)
	for i := range cfg.Sentinels {
		p := spawnSentinel(tb, binary, i, fmt.Sprintf(
			"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
			sentinelMaster, host, port, quorum, sentinelMaster, cfg.DownAfter.Milliseconds(), sentinelMaster, sentinelMaster))
		s.sentinels = append(s.sentinels, p)
		s.Addrs = append(s.Addrs, p.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaReadyWithin)
	defer cancel()
	if err := pollUntil(ctx, func() error { return s.checkWatching(ctx, cfg.Replicas, cfg.Sentinels-1) }); err != nil {
		tb.Fatalf("testsupport: sentinels not watching within %v: %v", replicaReadyWithin, err)
	}
	return s
}

// spawnSentinel starts sentinel i with the monitor lines conf, on a free
// port, in its own directory (a sentinel rewrites its config file).
func spawnSentinel(tb testing.TB, binary string, i int, conf string) *RedisProcess {
	tb.Helper()
	dir := tb.TempDir()
	p := &RedisProcess{name: fmt.Sprintf("sentinel %d", i), logPath: filepath.Join(dir, "sentinel.log")}
	tb.Cleanup(func() {
		p.kill()
		if tb.Failed() {
			tb.Logf("testsupport: %s", p.logTail())
		}
	})
	var last error
	for range redisSpawnAttempts {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testsupport: find a free port: %v", err)
		}
		path := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n%s", port, dir, conf)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			tb.Fatalf("testsupport: write %s: %v", path, err)
		}
		proc, err := startOSProc(binary, dir, p.logPath, path, "--sentinel")
		if err != nil {
			tb.Fatalf("testsupport: start %s: %v", p.name, err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = waitRedisReady(addr, proc.pid(), proc.done); last == nil {
			p.Addr, p.proc = addr, proc
			return p
		}
		proc.kill()
	}
	tb.Fatalf("testsupport: start %s: %v\n%s", p.name, last, p.logTail())
	return nil
}

// checkWatching reports why the sentinels are not all watching yet: each
// must name the primary and count replicas replicas and others other
// sentinels.
func (s *Sentinel) checkWatching(ctx context.Context, replicas, others int) error {
	primary := s.Primary()
	for _, p := range s.sentinels {
		rdb := redis.NewSentinelClient(&redis.Options{Addr: p.Addr})
		m, err := rdb.Master(ctx, sentinelMaster).Result()
		_ = rdb.Close()
		if err != nil {
			return fmt.Errorf("%s: SENTINEL MASTER: %w", p.name, err)
		}
		addr := net.JoinHostPort(m["ip"], m["port"])
		if addr != primary.Addr || m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(others) {
			return fmt.Errorf("%s: master %s, %s replicas, %s other sentinels; want %s, %d, %d",
				p.name, addr, m["num-slaves"], m["num-other-sentinels"], primary.Addr, replicas, others)
		}
	}
	return nil
}

// Key returns Namespace and parts joined by ":", as [Redis.Key] does.
func (s *Sentinel) Key(parts ...string) string { return s.rr.Key(parts...) }

// Primary returns the process that is the primary now: the one started as
// primary, or the replica a KillPrimary promoted.
func (s *Sentinel) Primary() *RedisProcess { return s.rr.Primary() }

// Client returns a go-redis failover client (redis.NewFailoverClient) of
// the sentinels, closed when the test ends: it asks them for the primary,
// and follows a promotion (the sentinels' +switch-master) by itself. opts
// change the options after MasterName and SentinelAddrs are set.
func (s *Sentinel) Client(tb testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	tb.Helper()
	opt := &redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.Addrs}
	for _, o := range opts {
		o(opt)
	}
	c := redis.NewFailoverClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// KillPrimary kills the primary with SIGKILL and waits until the sentinels
// have promoted a replica: every sentinel names it as the master and it
// answers role:master. It returns the promoted process. Writes the dead
// primary answered but had not yet sent to that replica are lost, as in
// production. The dead primary stays dead.
func (s *Sentinel) KillPrimary(tb testing.TB) *RedisProcess {
	tb.Helper()
	old := s.Primary()
	old.kill()
	if s.behind {
		for i := range s.replicas {
			s.rr.ResumeReplica(tb, i)
		}
		s.behind = false
	}
	ctx, cancel := context.WithTimeout(context.Background(), sentinelPromoteWithin)
	defer cancel()
	var promoted *RedisProcess
	err := pollUntil(ctx, func() error {
		p, err := s.promotedFrom(ctx, old)
		promoted = p
		return err
	})
	if err != nil {
		tb.Fatalf("testsupport: no promotion within %v of killing %s: %v", sentinelPromoteWithin, old.Addr, err)
	}
	s.rr.mu.Lock()
	s.rr.primary = promoted
	s.rr.mu.Unlock()
	return promoted
}

// LoseReplication makes every replica fall behind for good, a replica that
// lags at its worst: each is paused (SIGSTOP) and the primary drops its
// replication links, so that no write from now on reaches a replica (WAIT
// answers 0). KillPrimary resumes them after the kill, so that one is
// promoted, without the writes since.
func (s *Sentinel) LoseReplication(tb testing.TB) {
	tb.Helper()
	for i := range s.replicas {
		s.rr.PauseReplica(tb, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Primary().do(ctx, "CLIENT", "KILL", "TYPE", "replica"); err != nil {
		tb.Fatalf("testsupport: drop the replication links: %v", err)
	}
	s.behind = true
}

// promotedFrom returns the process every sentinel names as master, once
// that is not old and the process says it is a master.
func (s *Sentinel) promotedFrom(ctx context.Context, old *RedisProcess) (*RedisProcess, error) {
	var named string
	for _, p := range s.sentinels {
		rdb := redis.NewSentinelClient(&redis.Options{Addr: p.Addr})
		addr, err := rdb.GetMasterAddrByName(ctx, sentinelMaster).Result()
		_ = rdb.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: SENTINEL GET-MASTER-ADDR-BY-NAME: %w", p.name, err)
		}
		a := net.JoinHostPort(addr[0], addr[1])
		if named != "" && a != named {
			return nil, fmt.Errorf("sentinels disagree: %s and %s", named, a)
		}
		named = a
	}
	if named == old.Addr {
		return nil, fmt.Errorf("sentinels still name %s", old.Addr)
	}
	for _, p := range s.data {
		if p.Addr != named {
			continue
		}
		info, err := replicationInfo(ctx, p)
		if err != nil {
			return nil, err
		}
		if role := infoField(info, "role"); role != "master" {
			return nil, fmt.Errorf("%s is named master but says role:%s", p.name, role)
		}
		return p, nil
	}
	return nil, fmt.Errorf("sentinels name %s, which is none of ours", named)
}
