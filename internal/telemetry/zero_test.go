package telemetry_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ckernel/playerdata/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// values lists an enum's values by name, from 0 up to the first that is
// out of range (String "invalid").
func values[E ~uint8](e func(E) string) []string {
	var out []string
	for v := E(0); e(v) != "invalid"; v++ {
		out = append(out, e(v))
	}
	return out
}

// TestCountersStartAtZero: right after New and Driver, before any event,
// every series of every counter is exported, at 0, so that a dashboard
// panel draws a flat line instead of "No data".
func TestCountersStartAtZero(t *testing.T) {
	s := newSDK(t, "server-a", "game.CKHandoff", nil)
	s.tel.Driver("PlayerData")
	s.tel.Driver("Inventory")
	drivers := []string{"PlayerData", "Inventory"}
	handoff := values(telemetry.HandoffMessage.String)
	want := map[string][]string{ // counter: its series, as "key=value,…" sorted
		"playerdata.lock.losses":            series(drivers, telemetry.LossReasonKey, values(telemetry.LossReason.String)),
		"playerdata.takeovers":              series(drivers, telemetry.TakeoverKey, values(telemetry.TakeoverHow.String)),
		"playerdata.messages.sent":          series(drivers, telemetry.SendOutcomeKey, values(telemetry.SendOutcome.String)),
		"playerdata.messages.applied":       series(drivers, "", nil),
		"playerdata.messages.dead_lettered": series(drivers, "", nil),
		"playerdata.history.trimmed":        series(drivers, telemetry.HistoryTrimKey, []string{"count", "bytes"}),
		"playerdata.handoff.sent": append(series(nil, telemetry.HandoffMessageKey, handoff),
			series(nil, telemetry.HandoffMessageKey, handoff, "error.type=publish_failed")...),
		"playerdata.handoff.received": series(nil, telemetry.HandoffMessageKey, handoff),
		"playerdata.fences":           {""},
		"playerdata.fence.sessions":   {""},
	}
	got := s.collect(t)
	for name, series := range want {
		m, ok := got[name]
		if !ok {
			t.Errorf("%s: not exported before its first event", name)
			continue
		}
		var have []string
		for _, p := range m.Data.(metricdataSum).DataPoints {
			have = append(have, attrString(p.Attributes))
			if p.Value != 0 {
				t.Errorf("%s{%s} = %d before any event, want 0", name, attrString(p.Attributes), p.Value)
			}
		}
		slices.Sort(have)
		slices.Sort(series)
		if !slices.Equal(have, series) {
			t.Errorf("%s: series\n  %q\nwant\n  %q", name, have, series)
		}
	}
	for _, in := range instruments {
		if _, listed := want[in.name]; !listed && in.kind == "counter" && !strings.HasPrefix(in.name, "playerdata.bus.") {
			t.Errorf("%s: a counter this test does not check", in.name)
		}
	}
}

// series is every attribute set of a counter: one per driver (none when
// drivers is nil) times one per value of key (none when key is ""), plus
// the extra "key=value" pairs.
func series(drivers []string, key attribute.Key, vals []string, extra ...string) []string {
	if drivers == nil {
		drivers = []string{""}
	}
	if key == "" {
		vals = []string{""}
	}
	var out []string
	for _, d := range drivers {
		for _, v := range vals {
			var kv []string
			if d != "" {
				kv = append(kv, fmt.Sprintf("%s=%s", telemetry.DriverKey, d))
			}
			if key != "" {
				kv = append(kv, fmt.Sprintf("%s=%s", key, v))
			}
			kv = append(kv, extra...)
			slices.Sort(kv)
			out = append(out, strings.Join(kv, ","))
		}
	}
	return out
}

// attrString is a set as "key=value,…", keys sorted.
func attrString(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.String()))
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}
