package bench

import (
	"bytes"
	"strings"
	"testing"
)

// A figure the Redis did not report (INFO cpu and commandstats, MEMORY
// USAGE: miniredis answers neither) prints as n/a with the reason, never as
// a measured 0; one it reported prints as a number.
func TestWriteTextSaysNAWhereNotMeasured(t *testing.T) {
	tests := []struct {
		name    string
		machine Machine
		want    []string // lines that must appear
		notWant []string
	}{
		{"embedded Redis", Machine{EmbeddedRedis: true, EmbeddedNATS: true},
			[]string{"Redis n/a (embedded Redis) bytes per record", "acquire n/a (embedded Redis)",
				"n/a (embedded Redis) Redis commands", "ours     n/a (embedded Redis)"},
			[]string{"Redis 0 bytes per record", "acquire 0.0", "0.00 Redis commands"}},
		{"a Redis without MEMORY USAGE", Machine{RedisStats: true},
			[]string{"Redis n/a (not reported by this Redis) bytes per record", "acquire 7.0"},
			[]string{"embedded Redis", "Redis 0 bytes per record"}},
		{"a Redis that reports both", Machine{RedisStats: true, RedisMemory: true},
			[]string{"Redis 900 bytes per record", "acquire 7.0", "0.50 Redis commands"},
			[]string{"n/a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Machine: tc.machine}
			r.Scripts.Acquire = 7
			r.Memory.RedisBytesPerRecord = 900
			r.Presence.CmdsPerBeat = 0.5
			var buf bytes.Buffer
			if err := r.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("%q in:\n%s", w, out)
				}
			}
		})
	}
}

// The HTML report says n/a where the text does.
func TestReportSaysNAWhereNotMeasured(t *testing.T) {
	r := &Result{Machine: Machine{EmbeddedRedis: true, EmbeddedNATS: true}}
	r.Memory.History.Layouts = []HistoryLayout{{ChangePct: 5, Versions: 24}}
	var b bytes.Buffer
	if err := writeHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acquire n/a (embedded Redis) µs", "Redis n/a (embedded Redis) bytes per record"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report has no %q", want)
		}
	}
}
