package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/testsupport"
)

func TestRedisURLForms(t *testing.T) {
	t.Run("sentinel", func(t *testing.T) {
		raw := "redis://op:pw@s1:26379/2?master_name=mymaster&addr=s2:26379&addr=s3:26379"
		if !isSentinelURL(raw) || isSentinelURL("redis://h:1") || isSentinelURL("h:1") {
			t.Fatal("isSentinelURL tells a Sentinel URL wrong")
		}
		opt, err := failoverOptions(raw)
		if err != nil {
			t.Fatal(err)
		}
		if opt.MasterName != "mymaster" || strings.Join(opt.SentinelAddrs, " ") != "s1:26379 s2:26379 s3:26379" || opt.DB != 2 ||
			opt.SentinelPassword != "pw" || opt.Password != "pw" || opt.Username != "op" || opt.DialTimeout != dialTimeout {
			t.Fatalf("failover options %+v", opt)
		}
		if _, err := failoverOptions("redis://s1:26379?master_name="); err == nil {
			t.Fatal("an empty master_name was accepted")
		}
		// The client a URL builds follows the primary the Sentinels name.
		c := redis.NewFailoverClient(opt)
		defer c.Close()
		if c.Options().DB != 2 {
			t.Fatalf("failover client options %+v", c.Options())
		}
	})
	t.Run("cluster", func(t *testing.T) {
		raw := "redis://:pw@h1:7000?addr=h2:7001&addr=h3:7002"
		node, err := redisOptions(raw)
		if err != nil {
			t.Fatal(err)
		}
		if node.Addr != "h1:7000" || node.Password != "pw" {
			t.Fatalf("node options %+v", node)
		}
		opt := clusterOptions(raw, node)
		if strings.Join(opt.Addrs, " ") != "h1:7000 h2:7001 h3:7002" || opt.Password != "pw" || opt.DialTimeout != dialTimeout {
			t.Fatalf("cluster options %+v", opt)
		}
	})
	t.Run("bad", func(t *testing.T) {
		for _, raw := range []string{"redis://h:1?bogus=1", "http://h:1", "redis://s:1?master_name=m&bogus=1"} {
			if _, err := connectRedis(context.Background(), raw); err == nil || !strings.Contains(err.Error(), "bad Redis") {
				t.Errorf("connectRedis(%q) = %v, want a bad URL error", raw, err)
			}
		}
	})
}

// startSentinel runs a Sentinel (redis-server --sentinel) that watches the
// primary at addr as "mymaster", and answers its address once it names
// that primary. It stops with the test.
func startSentinel(t *testing.T, addr string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	host, mport, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n", port, dir, host, mport)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	saddr := fmt.Sprintf("127.0.0.1:%d", port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: saddr})
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result()
		if err == nil && len(got) == 2 && net.JoinHostPort(got[0], got[1]) == addr {
			return saddr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel on %s never named the primary %s: %v %v", saddr, addr, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSentinelCLI runs verbs through a real Sentinel, named by the
// master_name URL form and by a plain URL of the Sentinel (found by INFO).
func TestSentinelCLI(t *testing.T) {
	r := testsupport.StartOwnRedis(t)
	if r.Kind != testsupport.KindRedisServer {
		t.Skip("needs redis-server")
	}
	saddr := startSentinel(t, r.Addr)
	client := func(tb testing.TB) redis.UniversalClient { return r.Client(tb) }
	e := testEnv{url: "redis://" + saddr + "?master_name=mymaster", ns: r.Namespace, rdb: client(t), client: client}
	a := e.startServer(t, "server-a", serverOpts{})
	a.hold(t, "user:42", 10)
	for _, url := range []string{e.url, "redis://" + saddr} {
		res := runArgs(t, 10*time.Second, "inspect", "--redis", url, "--namespace", e.ns, "--driver", "PlayerData", "user:42")
		if res.err != nil || !strings.Contains(res.stdout, "held by server-a") {
			t.Fatalf("inspect through %s = %v:\n%s", url, res.err, res.stdout)
		}
		res = runArgs(t, 10*time.Second, "locks", "--redis", url, "--namespace", e.ns, "--job", "server-a")
		if res.err != nil || !strings.Contains(res.stdout, "1 lock held by server-a") {
			t.Fatalf("locks through %s = %v:\n%s", url, res.err, res.stdout)
		}
	}
	conn, err := connectRedis(context.Background(), "redis://"+saddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.rdb.Close()
	if conn.kind != deploySentinel {
		t.Fatalf("a Sentinel's plain URL connected as %s", conn.kind)
	}
}
