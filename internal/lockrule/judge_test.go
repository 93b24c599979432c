package lockrule

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ckernel/playerdata/internal/presencecore"
)

// fakePresence answers scripted readings, one per Read of each job (the
// last repeats), and records when each was asked.
type fakePresence struct {
	mu      sync.Mutex
	reads   map[string][]presencecore.Reading
	list    []presencecore.Entry
	listErr error
	shards  int
	asked   map[string][]time.Time
}

func (f *fakePresence) Read(_ context.Context, job string) presencecore.Reading {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked == nil {
		f.asked = map[string][]time.Time{}
	}
	f.asked[job] = append(f.asked[job], time.Now())
	rs := f.reads[job]
	if len(rs) == 0 {
		rs = f.reads["*"]
	}
	if len(rs) == 0 {
		return presencecore.Reading{Status: presencecore.Unknown, Err: errors.New("no reading scripted")}
	}
	r := rs[0]
	if len(rs) > 1 {
		if _, own := f.reads[job]; own {
			f.reads[job] = rs[1:]
		} else {
			f.reads["*"] = rs[1:]
		}
	}
	return r
}

func (f *fakePresence) List(context.Context) ([]presencecore.Entry, error) { return f.list, f.listErr }

func (f *fakePresence) Config() presencecore.Config {
	return presencecore.Config{Shards: max(f.shards, 1)}
}

var (
	stopped = presencecore.Reading{Status: presencecore.Stopped}
	alive   = presencecore.Reading{Status: presencecore.Alive, ExpiresIn: 2 * time.Second}
	grace   = presencecore.Reading{Status: presencecore.Unknown, ExpiresIn: 7 * time.Second}
	failed  = presencecore.Reading{Status: presencecore.Unknown, Err: errors.New("connection refused")}
)

// Judge's answers, each from the readings it was given: a stop needs two
// stopped reads a beat apart; alive and unknown (a restart's grace, a failed
// read) are noes at once, however old the lock; a lock without the flag goes
// by age; a broken flag counts as the flag; a lock that names no holder is
// freed only once every server and every shard's missing beat is proven
// stopped.
func TestJudge(t *testing.T) {
	const beat = 30 * time.Millisecond
	rules := Rules{MaxAge: 4 * time.Minute, Skew: time.Minute, Beat: beat}
	now := time.Now()
	held := func(job, flag string, age time.Duration) Lock {
		return Parse(Fields{Job: job, Token: "tok", Presence: flag,
			At: itoa(now.Add(-age).UnixMilli())}, now, rules.Skew)
	}
	for _, tc := range []struct {
		name    string
		lock    Lock
		p       *fakePresence
		want    Answer
		reads   int
		retryIn time.Duration
	}{
		{"free", Parse(Fields{}, now, time.Minute), &fakePresence{}, Free, 0, 0},
		{"alive, however old", held("a", "1", time.Hour), &fakePresence{reads: map[string][]presencecore.Reading{"a": {alive}}}, Alive, 1, 0},
		{"unknown after a restart", held("a", "1", time.Hour), &fakePresence{reads: map[string][]presencecore.Reading{"a": {grace}}}, Unknown, 1, 7 * time.Second},
		{"a failed read", held("a", "1", time.Hour), &fakePresence{reads: map[string][]presencecore.Reading{"a": {failed}}}, Unknown, 1, 0},
		{"stopped twice a beat apart", held("a", "1", time.Second), &fakePresence{reads: map[string][]presencecore.Reading{"a": {stopped, stopped}}}, Stopped, 2, 0},
		{"stopped, then unknown", held("a", "1", time.Second), &fakePresence{reads: map[string][]presencecore.Reading{"a": {stopped, grace}}}, Unknown, 2, 7 * time.Second},
		{"stopped, then alive", held("a", "1", time.Second), &fakePresence{reads: map[string][]presencecore.Reading{"a": {stopped, alive}}}, Alive, 2, 0},
		{"a broken flag counts as the flag", held("a", "x", time.Hour), &fakePresence{reads: map[string][]presencecore.Reading{"a": {alive}}}, Alive, 1, 0},
		{"no flag, young", held("a", "0", time.Minute), &fakePresence{}, Young, 0, 3*time.Minute + time.Millisecond},
		{"no flag, aged", held("a", "0", 5*time.Minute), &fakePresence{}, Aged, 0, 0},
		{"no flag, its stamp broken", Parse(Fields{Job: "a", Token: "t", At: "abc"}, now, time.Minute), &fakePresence{}, Young, 0, 0},
		{"no holder, a live server", held("", "1", time.Hour), &fakePresence{list: []presencecore.Entry{
			{JobID: "b", Status: presencecore.Alive}, {JobID: "c", Status: presencecore.Stopped}}}, LiveServers, 0, 0},
		{"no holder, a server unknown", held("", "1", time.Hour), &fakePresence{list: []presencecore.Entry{
			{JobID: "b", Status: presencecore.Unknown}}}, LiveServers, 0, 0},
		{"no holder, every server stopped", held("", "1", time.Hour), &fakePresence{list: []presencecore.Entry{
			{JobID: "c", Status: presencecore.Stopped}}, reads: map[string][]presencecore.Reading{"*": {stopped}}}, NoLiveHolder, 4, 0},
		{"no holder, shards in a restart's grace", held("", "x", time.Hour), &fakePresence{
			reads: map[string][]presencecore.Reading{"*": {grace}}}, Unknown, 1, 7 * time.Second},
		{"no holder, the list fails", held("", "1", time.Hour), &fakePresence{listErr: errors.New("down")}, Unknown, 0, 0},
		{"no holder, no flag, aged", held("", "0", 5*time.Minute), &fakePresence{}, NoLiveHolder, 0, 0},
		{"no holder, no flag, young", held("", "0", time.Minute), &fakePresence{}, LiveServers, 0, 3*time.Minute + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Judge(context.Background(), Env{Presence: tc.p, Clock: clock.New(), Rules: rules}, tc.lock, now)
			if err != nil {
				t.Fatal(err)
			}
			if v.Answer != tc.want || v.Reads != tc.reads || v.RetryIn.Round(100*time.Millisecond) != tc.retryIn.Round(100*time.Millisecond) || v.Why == "" {
				t.Fatalf("verdict %+v; want %v after %d reads, retry in %v, with a reason", v, tc.want, tc.reads, tc.retryIn)
			}
			if v.Answer.May() != (tc.want == Free || tc.want == Stopped || tc.want == Aged || tc.want == NoLiveHolder) {
				t.Fatalf("%v.May() = %v", v.Answer, v.Answer.May())
			}
			for job, at := range tc.p.asked {
				for i := 1; i < len(at) && v.Answer == Stopped; i++ {
					if gap := at[i].Sub(at[i-1]); gap < beat {
						t.Errorf("reads of %s %v apart, under a beat (%v)", job, gap, beat)
					}
				}
			}
		})
	}
	// A cancelled context ends a proof, and says so.
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakePresence{reads: map[string][]presencecore.Reading{"a": {stopped}}}
	time.AfterFunc(beat/3, cancel)
	if _, err := Judge(ctx, Env{Presence: p, Rules: rules}, held("a", "1", time.Second), now); !errors.Is(err, context.Canceled) {
		t.Fatalf("Judge under a cancelled context = %v, want context.Canceled", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A lock that names no holder is freed while servers live only once each
// of them answered, asked over the bus, that it holds no lock under its
// token; a server that does not answer keeps it.
func TestJudgeAsksTheLiveServers(t *testing.T) {
	rules := Rules{MaxAge: 4 * time.Minute, Skew: time.Minute, Beat: 20 * time.Millisecond}
	now := time.Now()
	l := Parse(Fields{Token: "tok", Presence: "1", At: strconv.FormatInt(now.UnixMilli(), 10)}, now, rules.Skew)
	p := &fakePresence{list: []presencecore.Entry{{JobID: "b", Status: presencecore.Alive}, {JobID: "c", Status: presencecore.Unknown},
		{JobID: "d", Status: presencecore.Stopped}}, reads: map[string][]presencecore.Reading{"*": {stopped}}}
	for _, tc := range []struct {
		name     string
		answered []string
		want     Answer
		servers  []string
	}{
		{"every live server answered", []string{"b", "c"}, NoLiveHolder, []string{"d", "b", "c"}},
		{"one did not", []string{"b"}, LiveServers, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			ask := func(_ context.Context, token string, jobs []string) []string {
				if token != "tok" {
					t.Errorf("asked about token %q", token)
				}
				asked = jobs
				return tc.answered
			}
			v, err := Judge(context.Background(), Env{Presence: p, Rules: rules, Ask: ask}, l, now)
			if err != nil {
				t.Fatal(err)
			}
			if v.Answer != tc.want || !slices.Equal(v.Servers, tc.servers) || !slices.Equal(asked, []string{"b", "c"}) {
				t.Fatalf("verdict %+v after asking %v; want %v naming %v", v, asked, tc.want, tc.servers)
			}
		})
	}
}
