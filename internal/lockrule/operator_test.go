package lockrule_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/testsupport"
)

// readings is a Presence whose every job reads as one reading ("*": any
// job not named), and whose list is every job it names.
type readings struct {
	byJob map[string]presencecore.Reading
}

func (r readings) Read(_ context.Context, job string) presencecore.Reading {
	if rd, ok := r.byJob[job]; ok {
		return rd
	}
	return r.byJob["*"]
}

func (r readings) List(context.Context) ([]presencecore.Entry, error) {
	var out []presencecore.Entry
	for job, rd := range r.byJob {
		if job != "*" {
			out = append(out, presencecore.Entry{JobID: job, Status: rd.Status})
		}
	}
	return out, nil
}

func (r readings) Config() presencecore.Config { return presencecore.Config{Shards: 1} }

var (
	stopped = presencecore.Reading{Status: presencecore.Stopped}
	alive   = presencecore.Reading{Status: presencecore.Alive, ExpiresIn: time.Second}
	grace   = presencecore.Reading{Status: presencecore.Unknown, ExpiresIn: 9 * time.Second}
	failed  = presencecore.Reading{Status: presencecore.Unknown, Err: errors.New("connection refused")}
)

// Unlock frees exactly the lock it judged, and only on a yes: a live or
// unknown holder keeps its lock; a lock that changed hands, was released or
// (for the age rule) written again between the read and the free is left
// as it is.
func TestUnlock(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	rules := lockrule.Rules{MaxAge: 4 * time.Minute, Skew: time.Minute, Beat: 20 * time.Millisecond}
	old := strconv.FormatInt(time.Now().Add(-5*time.Minute).UnixMilli(), 10)
	for i, tc := range []struct {
		name   string
		fields []any
		pres   presencecore.Reading
		race   func(ctx context.Context, rk string)
		dry    bool
		want   lockrule.UnlockOutcome
		freed  bool
	}{
		{"a stopped holder", []any{"lock.presence", "1"}, stopped, nil, false, lockrule.UnlockFreed, true},
		{"a dry run", []any{"lock.presence", "1"}, stopped, nil, true, lockrule.UnlockWouldFree, false},
		{"a live holder", []any{"lock.presence", "1"}, alive, nil, false, lockrule.UnlockRefused, false},
		{"a restart's grace", []any{"lock.presence", "1"}, grace, nil, false, lockrule.UnlockRefused, false},
		{"a failed read", []any{"lock.presence", "1"}, failed, nil, false, lockrule.UnlockRefused, false},
		{"no flag, old", []any{"lock.presence", "0"}, alive, nil, false, lockrule.UnlockFreed, true},
		{"no flag, old, saved meanwhile", []any{"lock.presence", "0"}, alive, func(ctx context.Context, rk string) {
			rdb.HSet(ctx, rk, "lock.at", strconv.FormatInt(time.Now().UnixMilli(), 10))
		}, false, lockrule.UnlockRefused, false},
		{"taken meanwhile", []any{"lock.presence", "1"}, stopped, func(ctx context.Context, rk string) {
			rdb.HSet(ctx, rk, "lock.job", "b", "lock.token", "tok-b")
		}, false, lockrule.UnlockChanged, false},
		{"released meanwhile", []any{"lock.presence", "1"}, stopped, func(ctx context.Context, rk string) {
			if _, err := record.Save(ctx, rdb, rk, record.SaveArgs{Mode: record.ModeRelease, Token: "tok-a"}); err != nil {
				t.Error(err)
			}
		}, false, lockrule.UnlockReleased, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk := record.Key(r.Namespace, "PlayerData", "u"+strconv.Itoa(i))
			rdb.HSet(ctx, rk, append([]any{"epoch", "3", "ver", "1", "lock.job", "a", "lock.token", "tok-a", "lock.at", old},
				tc.fields...)...)
			client := rdb
			if tc.race != nil {
				client = r.Client(t)
				client.AddHook(&testsupport.BeforeScriptHook{Key: rk, Do: func(ctx context.Context) { tc.race(ctx, rk) }})
			}
			env := lockrule.Env{Records: client, Presence: readings{map[string]presencecore.Reading{"a": tc.pres}}, Rules: rules}
			res, err := lockrule.Unlock(ctx, env, rk, tc.dry)
			if err != nil || res.Outcome != tc.want {
				t.Fatalf("Unlock = %+v, %v; want outcome %v", res, err, tc.want)
			}
			tok := rdb.HGet(ctx, rk, "lock.token").Val()
			if (tok == "") != tc.freed {
				t.Fatalf("lock.token %q after Unlock, want freed %v", tok, tc.freed)
			}
			if tc.freed && rdb.HExists(ctx, rk, "released").Val() && tc.want == lockrule.UnlockFreed {
				t.Fatal("the free left a release that the freed token could claim as its own")
			}
		})
	}
}

// Repair mends a broken lock in place, the holder keeping its token
// whatever its presence reads, and frees a lock that names no holder only
// with force and once no live server can hold it.
func TestRepairNeverMakesASecondOwner(t *testing.T) {
	r := testsupport.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	rules := lockrule.Rules{MaxAge: 4 * time.Minute, Skew: time.Minute, Beat: 20 * time.Millisecond}
	for i, tc := range []struct {
		name    string
		fields  []any
		pres    map[string]presencecore.Reading
		force   bool
		token   string // the lock token after the repair ("": free)
		flag    string // lock.presence after it
		changed string // a field repair changed ("": none)
		left    string // a field it left ("": none)
	}{
		{"lock.at broken, holder alive", []any{"lock.job", "a", "lock.at", "abc", "lock.presence", "1"},
			map[string]presencecore.Reading{"a": alive}, true, "tok", "1", "lock.at", ""},
		{"lock.at broken, holder stopped", []any{"lock.job", "a", "lock.at", "abc", "lock.presence", "1"},
			map[string]presencecore.Reading{"a": stopped}, true, "tok", "1", "lock.at", ""},
		{"flag broken, holder alive", []any{"lock.job", "a", "lock.at", "5", "lock.presence", "x"},
			map[string]presencecore.Reading{"a": alive}, true, "tok", "1", "lock.presence", ""},
		{"flag broken, holder unknown", []any{"lock.job", "a", "lock.at", "5", "lock.presence", "x"},
			map[string]presencecore.Reading{"a": grace}, true, "tok", "1", "lock.presence", ""},
		{"flag broken, presence unreadable", []any{"lock.job", "a", "lock.at", "5", "lock.presence", "x"},
			map[string]presencecore.Reading{"a": failed}, true, "tok", "x", "", "lock.presence"},
		{"no holder, a live server", []any{"lock.job", "", "lock.at", "5", "lock.presence", "1"},
			map[string]presencecore.Reading{"b": alive, "*": stopped}, true, "tok", "1", "", "lock.job"},
		{"no holder, a restart's grace", []any{"lock.job", "", "lock.at", "5", "lock.presence", "1"},
			map[string]presencecore.Reading{"*": grace}, true, "tok", "1", "", "lock.job"},
		{"no holder, every server stopped, without force", []any{"lock.job", "", "lock.at", "5", "lock.presence", "1"},
			map[string]presencecore.Reading{"c": stopped, "*": stopped}, false, "tok", "1", "", "lock.job"},
		{"no holder, every server stopped, forced", []any{"lock.job", "", "lock.at", "5", "lock.presence", "1"},
			map[string]presencecore.Reading{"c": stopped, "*": stopped}, true, "", "", "lock.job", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rk := record.Key(r.Namespace, "PlayerData", "r"+strconv.Itoa(i))
			rdb.HSet(ctx, rk, append([]any{"epoch", "3", "ver", "1", "lock.token", "tok"}, tc.fields...)...)
			env := lockrule.Env{Records: rdb, Presence: readings{tc.pres}, Rules: rules}
			before := rdb.HGetAll(ctx, rk).Val()
			dry, err := lockrule.Repair(ctx, env, rk, lockrule.RepairOptions{DryRun: true, Force: tc.force})
			if err != nil {
				t.Fatal(err)
			}
			if after := rdb.HGetAll(ctx, rk).Val(); !equalMaps(before, after) {
				t.Fatalf("the dry run wrote: %v, was %v (it said %+v)", after, before, dry)
			}
			res, err := lockrule.Repair(ctx, env, rk, lockrule.RepairOptions{Force: tc.force})
			if err != nil {
				t.Fatal(err)
			}
			if !hasField(res.Changed, tc.changed) || !hasField(res.Left, tc.left) {
				t.Fatalf("repair = %+v; want %q changed, %q left", res, tc.changed, tc.left)
			}
			f := rdb.HMGet(ctx, rk, "lock.token", "lock.presence").Val()
			tok, _ := f[0].(string)
			flag, _ := f[1].(string)
			if tok != tc.token || flag != tc.flag {
				t.Fatalf("lock after the repair: token %q, flag %q; want %q, %q", tok, flag, tc.token, tc.flag)
			}
			for _, l := range res.Left {
				if strings.HasPrefix(l.Field, "lock.") && !strings.Contains(l.Why, " ") {
					t.Errorf("left %s without a reason: %q", l.Field, l.Why)
				}
			}
		})
	}
}

func hasField(fs []record.CorruptField, name string) bool {
	if name == "" {
		for _, f := range fs {
			if strings.HasPrefix(f.Field, "lock.") {
				return false
			}
		}
		return true
	}
	for _, f := range fs {
		if f.Field == name {
			return true
		}
	}
	return false
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
