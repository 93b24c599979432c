//go:build linux

package faulttest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// dist is a set of durations, summarised as p50/p99/max.
type dist []time.Duration

func (d dist) sorted() dist {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// pct is the p-th percentile (nearest rank), 0 for an empty set.
func (d dist) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := d.sorted()
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (d dist) max() time.Duration { return d.pct(100) }

func (d dist) min() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d.sorted()[0]
}

// String is "p50 X, p99 Y, max Z" (or "none").
func (d dist) String() string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s", ms(d.pct(50)), ms(d.pct(99)), ms(d.max()))
}

// ms formats a duration in milliseconds (seconds above 10 s).
func ms(d time.Duration) string {
	if d >= 10*time.Second || d <= -10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// since is the time from t to the Unix-nanosecond instant ns.
func since(t time.Time, ns int64) time.Duration { return time.Duration(ns - t.UnixNano()) }

// report collects one scenario's figures and logs them, when the test
// ends, as a row of the README's "Faults we test" table with its outcome.
type report struct {
	t        testing.TB
	scenario string
	promise  string
	figures  []string
}

// newReport starts the row; the test defers r.log().
func newReport(t testing.TB, scenario, promise string) *report {
	return &report{t: t, scenario: scenario, promise: promise}
}

// add appends a figure.
func (r *report) add(format string, a ...any) {
	r.figures = append(r.figures, fmt.Sprintf(format, a...))
}

// log prints the row (and each figure on its own line, for the test log).
func (r *report) log() {
	outcome := "pass"
	if r.t.Failed() {
		outcome = "FAIL"
	}
	r.t.Logf("README | %s | %s | %s | %s |", r.scenario, strings.Join(r.figures, "; "), r.promise, outcome)
}

// ackCheck is the "nothing acknowledged is lost" check over the events of
// every server: each join must load at least the coins of every save
// acknowledged (by any server) before it. A save acknowledged before a
// join's event landed before its acquire: a save landing after another
// acquisition of the key is refused by its token, so it is never
// acknowledged.
type ackCheck struct {
	joins  int      // joins checked against at least one earlier acknowledged save
	lost   []string // joins that loaded less
	maxAck map[string]int
}

func checkAcks(servers ...*server) ackCheck {
	var evs []Event
	for _, s := range servers {
		evs = append(evs, s.events(EvSaved, EvJoined)...)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].T < evs[j].T })
	ac := ackCheck{maxAck: make(map[string]int)}
	for _, e := range evs {
		switch e.Ev {
		case EvSaved:
			ac.maxAck[e.Key] = max(ac.maxAck[e.Key], e.Coins)
		case EvJoined:
			m, ok := ac.maxAck[e.Key]
			if !ok {
				continue
			}
			ac.joins++
			if e.Coins < m && len(ac.lost) < 20 {
				ac.lost = append(ac.lost, fmt.Sprintf("%s: %s loaded %d coins, %d were acknowledged", e.Key, e.Job, e.Coins, m))
			}
		}
	}
	return ac
}

// acksBefore is the highest acknowledged coins per key among saves whose
// events are stamped before t.
func acksBefore(t time.Time, servers ...*server) map[string]int {
	m := make(map[string]int)
	for _, s := range servers {
		for _, e := range s.events(EvSaved) {
			if e.T < t.UnixNano() {
				m[e.Key] = max(m[e.Key], e.Coins)
			}
		}
	}
	return m
}

// landing is the earliest instant (Unix ns) a join's acquire can have
// landed: the record's lock.at read right after it (Redis clock, ms,
// truncated), or, when that read failed, the moment Join was called.
func landing(j Event) int64 {
	if j.LockAtMS > 0 {
		return j.LockAtMS * int64(time.Millisecond)
	}
	return j.Sent
}
