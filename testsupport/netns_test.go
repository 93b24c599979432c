//go:build linux

package testsupport

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNetLabCuts: a redis-server in namespace srv, the test (in the root
// namespace) its client, and an observer in namespace obs. Cut outbound
// from srv to the root, a SET from the test lands but its answer is lost;
// cut inbound, the SET never arrives; cut both ways, nothing passes; the
// observer, never cut, sees each. After Heal a new connection works.
func TestNetLabCuts(t *testing.T) {
	if err := NetLabUsable(); err != nil {
		t.Skipf("testsupport: %v", err)
	}
	redisBin := lookPathOrSkip(t, "redis-server", "TestNetLabCuts")
	cliBin := lookPathOrSkip(t, "redis-cli", "TestNetLabCuts")
	lab := NewNetLab(t)
	srv, obs := lab.NewNetNS(t, "srv"), lab.NewNetNS(t, "obs")

	dir := t.TempDir()
	cmd := srv.Command(redisBin, "--bind", srv.IP, "--port", "6379", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	addr := srv.IP + ":6379"
	fresh := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 300 * time.Millisecond,
			ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, PoolSize: 1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx := context.Background()
	rdb := fresh()
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = rdb.Ping(ctx).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("redis-server in %s does not answer the root namespace: %v", srv.Name, err)
	}
	observe := func(key string) string {
		t.Helper()
		out, err := obs.Command(cliBin, "-h", srv.IP, "-p", "6379", "GET", key).Output()
		if err != nil {
			t.Fatalf("redis-cli in %s: %v", obs.Name, err)
		}
		return strings.TrimSpace(string(out))
	}

	srv.Cut(t, lab.RootIP, Outbound)
	if err := rdb.Set(ctx, "out", "1", 0).Err(); err == nil {
		t.Error("SET answered while srv's packets to the root are dropped")
	}
	if got := observe("out"); got != "1" {
		t.Errorf("outbound cut: the SET did not land (observer reads %q); packets to srv must still arrive", got)
	}
	srv.Heal(t, lab.RootIP, Outbound)

	srv.Cut(t, lab.RootIP, Inbound)
	if err := fresh().Set(ctx, "in", "1", 0).Err(); err == nil {
		t.Error("SET answered while the root's packets to srv are dropped")
	}
	if got := observe("in"); got != "" {
		t.Errorf("inbound cut: the SET landed (observer reads %q)", got)
	}
	srv.Heal(t, lab.RootIP, Inbound)

	srv.Cut(t, lab.RootIP, BothWays)
	srv.Cut(t, lab.RootIP, BothWays) // idempotent
	if err := fresh().Ping(ctx).Err(); err == nil {
		t.Error("PING answered across a cut both ways")
	}
	if got := observe("out"); got != "1" {
		t.Errorf("the observer, never cut, reads %q", got)
	}
	srv.Heal(t, lab.RootIP, BothWays)
	if err := fresh().Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Heal: %v", err)
	}
}

// TestNetLabCleanup: a lab's namespaces are gone when its test ends.
func TestNetLabCleanup(t *testing.T) {
	if err := NetLabUsable(); err != nil {
		t.Skipf("testsupport: %v", err)
	}
	var names []string
	t.Run("lab", func(t *testing.T) {
		lab := NewNetLab(t)
		names = append(names, lab.NewNetNS(t, "a").Name, lab.hub)
	})
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(string(out), n+" ") || strings.Contains(string(out), n+"\n") {
			t.Errorf("namespace %s outlived its test:\n%s", n, out)
		}
	}
}
