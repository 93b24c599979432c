//go:build linux

package faulttest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	internalrecord "github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// The operator's verbs against live sessions, on real processes: the hint
// a join's ErrCorruptRecord prints, run exactly as printed through a shell,
// on a record whose lock another tool broke, with its holder live, paused
// (SIGSTOP) and crashed (kill -9); and unlock after Redis came back from
// an RDB snapshot older than the presence TTL.

// cli runs the playerdata program with args and REDIS_URL set to c's
// Redis; it returns what it printed and its exit status.
func (c *cluster) cli(args ...string) (string, int) {
	c.t.Helper()
	return c.run(exec.Command(os.Getenv(cliEnv), args...))
}

// shell runs line through sh, the playerdata program first on PATH and
// REDIS_URL set to c's Redis, as an operator pastes a hint.
func (c *cluster) shell(line string) (string, int) {
	c.t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(os.Getenv(cliEnv))+string(os.PathListSeparator)+os.Getenv("PATH"))
	return c.run(cmd)
}

func (c *cluster) run(cmd *exec.Cmd) (string, int) {
	c.t.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "REDIS_URL=redis://"+c.redis.Addr, "NATS_URL=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.t.Fatalf("%v: %v", cmd.Args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// corruptHint has a Node of this process, with timings tm, load key, and
// returns the field its ErrCorruptRecord names and the command it prints.
// The Node is closed (its presence entry removed) before it returns.
func (c *cluster) corruptHint(key string, tm timings) (field, hint string) {
	c.t.Helper()
	ctx := context.Background()
	n, err := datadriver.NewNode(ctx, datadriver.NodeConfig{JobID: "hint-reader", Redis: c.rdb, Namespace: c.ns,
		Beat: tm.beat, PresenceTTL: tm.ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = n.Close(ctx) }()
	d, err := datadriver.NewDriver(n, datadriver.Config[Player]{Name: driverName})
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = d.Load(ctx, key, datadriver.LoadOptions{HandoffWait: -1})
	var ce *datadriver.CorruptRecordError
	if !errors.As(err, &ce) {
		c.t.Fatalf("Load of %s = %v, want ErrCorruptRecord", key, err)
	}
	m := regexp.MustCompile("`(playerdata [^`]*)`").FindStringSubmatch(err.Error())
	if m == nil {
		c.t.Fatalf("no command in %q", err)
	}
	return ce.Path, m[1]
}

// updatesAfter is how many Updates s accepted at or after t.
func updatesAfter(s *server, t time.Time) int {
	n := 0
	for _, e := range s.events(EvUpdate) {
		if e.T >= t.UnixNano() {
			n++
		}
	}
	return n
}

// TestRepairHintOnABrokenLock: another tool breaks one lock field of a
// record (lock.presence=x, lock.at=abc, lock.job=""), a join elsewhere is
// refused with ErrCorruptRecord, and the operator runs the command it
// names, exactly as printed. A live holder keeps its lock and token and
// goes on playing, every accepted Update in its final save (the field is
// mended in place; a lock that names no holder is refused while the holder
// lives); a paused or crashed holder's lock is mended or freed, and the
// next join takes it, the paused holder accepting no Update after it.
func TestRepairHintOnABrokenLock(t *testing.T) {
	t.Parallel()
	for _, br := range []struct{ field, value string }{
		{"lock.presence", "x"}, {"lock.at", "abc"}, {"lock.job", ""},
	} {
		for _, state := range []string{"live", "paused", "crashed"} {
			t.Run(br.field+"/"+state, func(t *testing.T) {
				t.Parallel()
				repairHintCase(t, br.field, br.value, state)
			})
		}
	}
}

func repairHintCase(t *testing.T, field, value, state string) {
	ctx := context.Background()
	tm := shortTimings()
	c := newCluster(t, testsupport.StartOwnRedis(t))
	a := c.start(gsOpts{job: "a", count: 1, update: 20 * time.Millisecond, save: time.Hour, tm: tm, logUpdates: true})
	c.mustWait(10*time.Second, "a's join", func() bool { return a.keys(EvJoined) == 1 })
	key, rk := "user:0", internalrecord.Key(c.ns, driverName, "user:0")
	held := c.mustRecords(c.rdb, []string{key})[key]
	if err := c.rdb.HSet(ctx, rk, field, value).Err(); err != nil {
		t.Fatal(err)
	}
	switch state {
	case "paused":
		a.pause()
	case "crashed":
		a.kill()
	}
	if state != "live" {
		time.Sleep(tm.ttl + 2*tm.beat) // its presence expires
	}
	path, hint := c.corruptHint(key, tm)
	if path != field || !strings.Contains(hint, "--namespace "+c.ns) {
		t.Fatalf("ErrCorruptRecord names %s and %q; want %s and a command with --namespace", path, hint, field)
	}
	ran := time.Now()
	out, code := c.shell(hint)
	took := time.Since(ran)
	after := c.mustRecords(c.rdb, []string{key})[key]
	t.Logf("OPERATOR | %s broken, holder %s | `%s` | exit %d in %v | lock token kept: %v", field, state, hint, code,
		took.Round(time.Millisecond), after.Token == held.Token)
	if state == "live" {
		liveHolderKeepsPlaying(t, c, a, held, after, field, code, out, ran)
		return
	}
	if code != 0 {
		t.Fatalf("`%s` with a %s holder: exit %d\n%s", hint, state, code, out)
	}
	// The next join takes the lock (by the proof, or free), and the former
	// holder accepts no Update after it.
	b := c.start(gsOpts{job: "b", count: 1, update: 20 * time.Millisecond, save: time.Hour, tm: tm, logUpdates: true})
	c.mustWait(20*time.Second, "b's join", func() bool { return b.keys(EvJoined) == 1 })
	j, _ := b.latest(EvJoined, key)
	t.Logf("OPERATOR | %s broken, holder %s | b joined %v after the repair, epoch %d -> %d", field, state,
		time.Duration(j.T-ran.UnixNano()).Round(time.Millisecond), held.Epoch, j.Epoch)
	if state == "paused" {
		a.resume()
		time.Sleep(500 * time.Millisecond)
		if n := updatesAfter(a, time.Unix(0, j.T)); n > 0 {
			t.Fatalf("a accepted %d Updates after b's join: two owners", n)
		}
	}
}

// liveHolderKeepsPlaying checks the repair of a live holder's broken lock:
// the lock and token are kept (a lock that names no holder is refused,
// status 1), the holder plays on, and its final save holds its last
// accepted Update.
func liveHolderKeepsPlaying(t *testing.T, c *cluster, a *server, held, after record, field string, code int, out string,
	ran time.Time) {
	t.Helper()
	want := 0
	if field == "lock.job" {
		want = 1
	}
	if code != want || after.Token != held.Token {
		t.Fatalf("repair with a live holder: exit %d (want %d), token %q (was %q)\n%s", code, want, after.Token, held.Token, out)
	}
	c.mustWait(10*time.Second, "a's Updates after the repair", func() bool { return updatesAfter(a, ran) >= 20 })
	if code := a.terminate(); code != 0 {
		t.Fatalf("a exited %d after SIGTERM", code)
	}
	d := a.events(EvUpdate)
	last := d[len(d)-1].Coins
	final := c.mustRecords(c.rdb, []string{"user:0"})["user:0"]
	t.Logf("OPERATOR | %s broken, holder live | a accepted %d Updates after the repair; final save %d coins, last "+
		"accepted Update %d: %d lost", field, updatesAfter(a, ran), final.Data.Coins, last, last-final.Data.Coins)
	if final.Data.Coins != last || final.Token != "" {
		t.Fatalf("after a's release the record holds %d coins (lock %q), a's last accepted Update made %d",
			final.Data.Coins, final.Token, last)
	}
}

// TestUnlockAfterARestartFromAnOldSnapshot: Redis crashes and comes back
// from an RDB snapshot older than the presence TTL, whose beats are older
// than the holder's last ones. unlock of the live holder's lock is refused
// every time (unknown, then alive), never frees it (it may find it let go
// by the holder itself, fenced when its beats miss a loaded machine's
// restart window), and the holder plays on; once the
// holder is killed, unlock frees its lock after the restart's grace and
// the holder's silence are proven.
func TestUnlockAfterARestartFromAnOldSnapshot(t *testing.T) {
	t.Parallel()
	tm := shortTimings()
	r := testsupport.StartOwnRedis(t)
	if r.Kind != testsupport.KindRedisServer {
		t.Skip("needs redis-server (an RDB snapshot)")
	}
	c := newCluster(t, r)
	a := c.start(gsOpts{job: "a", count: 1, update: 20 * time.Millisecond, save: 100 * time.Millisecond, tm: tm,
		logUpdates: true, redisTimeout: 200 * time.Millisecond})
	c.mustWait(10*time.Second, "a's join and save", func() bool { return a.keys(EvSaved) == 1 })
	snap := r.Snapshot(t)
	time.Sleep(2 * tm.ttl) // the snapshot is now two TTLs old
	r.RestartFrom(t, snap)
	restarted := time.Now()
	args := []string{"unlock", "--namespace", c.ns, "--presence-ttl", tm.ttl.String(), "--beat", tm.beat.String(),
		"--driver", driverName, "user:0"}
	var unknownUntil time.Duration
	refused, free := 0, 0
	for time.Since(restarted) < 3*tm.ttl {
		out, code := c.cli(args...)
		switch {
		case code == 1:
			refused++
			if strings.Contains(out, "unknown") {
				unknownUntil = time.Since(restarted)
			}
		case code == 0 && !strings.Contains(out, "freed"):
			// The holder let the lock go itself: on a loaded machine its beats
			// can miss the restart's window, its lease lapse and its fence give
			// the lock back (it joins again). Nothing was freed by the unlock.
			free++
		default:
			t.Fatalf("unlock of a live holder's lock %v after the restart: exit %d\n%s", time.Since(restarted), code, out)
		}
	}
	// The holder plays on: an Update accepted after the restart's first TTL
	// (on a loaded machine its lease may lapse in the restart's window and
	// its rejoin take a few TTLs more; the bound is a margin, not a timing).
	c.mustWait(10*tm.ttl, "an Update of a after the restart", func() bool {
		return updatesAfter(a, restarted.Add(tm.ttl)) > 0
	})
	t.Logf("OPERATOR | Redis restarted from a snapshot %v old (TTL %v) | %d unlocks of the live holder's lock in %v, all "+
		"refused (unknown until %v after the restart, then alive; %d found the lock let go by its holder) | a accepted "+
		"%d Updates since", 2*tm.ttl, tm.ttl, refused, 3*tm.ttl, unknownUntil.Round(time.Millisecond), free,
		updatesAfter(a, restarted))
	a.kill()
	killed := time.Now()
	for {
		out, code := c.cli(args...)
		if code == 0 && strings.Contains(out, "freed") {
			break
		}
		if code != 1 || time.Since(killed) > 10*tm.ttl {
			t.Fatalf("unlock %v after the holder was killed: exit %d\n%s", time.Since(killed), code, out)
		}
		time.Sleep(tm.beat)
	}
	t.Logf("OPERATOR | holder killed after the restart | unlock freed its lock %v after the kill",
		time.Since(killed).Round(time.Millisecond))
}

// TestRepairAsksTheLiveServers: a lock that names no holder (lock.job
// emptied) while its holder lives is freed by `repair --force --nats`: the
// live servers are asked over NATS to release the key by its token; the
// holder saves and releases it, then answers, the others answer at once,
// and nothing is left to free. The holder's last accepted Update is in its
// release, and it accepts none after.
func TestRepairAsksTheLiveServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tm := shortTimings()
	c := newCluster(t, testsupport.StartOwnRedis(t))
	bus := testsupport.StartNATSCluster(t, 1)
	a := c.start(gsOpts{job: "a", natsURL: bus.URLs[0], count: 1, update: 20 * time.Millisecond, save: time.Hour, tm: tm,
		logUpdates: true})
	other := c.start(gsOpts{job: "c", natsURL: bus.URLs[0], first: 5, count: 1, tm: tm})
	c.mustWait(10*time.Second, "the joins", func() bool { return a.keys(EvJoined) == 1 && other.keys(EvJoined) == 1 })
	time.Sleep(tm.ttl) // past the new hash's grace: a missing beat proves a stop again
	key, rk := "user:0", internalrecord.Key(c.ns, driverName, "user:0")
	if err := c.rdb.HSet(ctx, rk, "lock.job", "").Err(); err != nil {
		t.Fatal(err)
	}
	_, hint := c.corruptHint(key, tm)
	ran := time.Now()
	out, code := c.shell("NATS_URL=" + bus.URLs[0] + " " + hint) // the hint as printed, NATS in the environment
	took := time.Since(ran)
	if code != 0 {
		t.Fatalf("%s with NATS_URL: exit %d\n%s", hint, code, out)
	}
	c.mustWait(5*time.Second, "a's session ended", func() bool { return a.keys(EvEnded) == 1 })
	ended, _ := a.latest(EvEnded, key)
	final := c.mustRecords(c.rdb, []string{key})[key]
	last := a.events(EvUpdate)
	lastCoins := last[len(last)-1].Coins
	t.Logf("OPERATOR | lock.job emptied, holder live, --nats | exit 0 in %v | a released (%s) with %d coins, its last "+
		"accepted Update %d | lock now %q", took.Round(time.Millisecond), ended.Err, final.Data.Coins, lastCoins, final.Token)
	if final.Token != "" || final.Data.Coins != lastCoins {
		t.Fatalf("record after the ask: token %q, %d coins; want free with a's last Update's %d", final.Token,
			final.Data.Coins, lastCoins)
	}
	if n := updatesAfter(a, time.Unix(0, ended.T)); n > 0 {
		t.Fatalf("a accepted %d Updates after its session ended", n)
	}
}
