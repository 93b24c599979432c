package telemetry_test

import (
	"context"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckernel/playerdata/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// instrument is what a metric must be.
type instrument struct {
	name, unit, kind string // kind: histogram, counter, updown
	desc             string // a word its description must contain
	keys             []attribute.Key
}

// instruments is the specification of every metric.
var instruments = []instrument{
	{"playerdata.join.duration", "s", "histogram", "joins", []attribute.Key{telemetry.DriverKey, telemetry.JoinPathKey, telemetry.JoinOutcomeKey}},
	{"playerdata.write.duration", "s", "histogram", "writes", []attribute.Key{telemetry.DriverKey, telemetry.WriteKindKey, telemetry.WriteOutcomeKey}},
	{"playerdata.profiles", "{profile}", "updown", "retained", []attribute.Key{telemetry.DriverKey, telemetry.ProfileStateKey}},
	{"playerdata.lock.losses", "{session}", "counter", "ErrLockLost", []attribute.Key{telemetry.DriverKey, telemetry.LossReasonKey}},
	{"playerdata.takeovers", "{lock}", "counter", "proven stopped", []attribute.Key{telemetry.DriverKey, telemetry.TakeoverKey}},
	{"playerdata.messages.sent", "{message}", "counter", "Driver.Send", []attribute.Key{telemetry.DriverKey, telemetry.SendOutcomeKey}},
	{"playerdata.messages.applied", "{message}", "counter", "applied", []attribute.Key{telemetry.DriverKey}},
	{"playerdata.handoff.sent", "{message}", "counter", "published", []attribute.Key{telemetry.HandoffMessageKey}},
	{"playerdata.handoff.received", "{message}", "counter", "received", []attribute.Key{telemetry.HandoffMessageKey}},
	{"playerdata.fences", "{fence}", "counter", "presence lease", nil},
	{"playerdata.fence.sessions", "{session}", "counter", "fences", nil},
	{"playerdata.bus.dropped", "{message}", "counter", "dropped", []attribute.Key{telemetry.DropReasonKey}},
	{"playerdata.bus.connection.events", "{event}", "counter", "disconnect", []attribute.Key{telemetry.BusEventKey}},
	{"playerdata.messages.dead_lettered", "{message}", "counter", "MaxMessageAttempts", []attribute.Key{telemetry.DriverKey}},
	{"playerdata.history.bytes", "By", "histogram", "HistoryBytes", []attribute.Key{telemetry.DriverKey}},
	{"playerdata.history.trimmed", "{version}", "counter", "oldest first", []attribute.Key{telemetry.DriverKey, telemetry.HistoryTrimKey}},
	{"playerdata.redis.memory.used", "By", "gauge", "used_memory", nil},
	{"playerdata.redis.memory.limit", "By", "gauge", "maxmemory", nil},
	{"playerdata.redis.eviction", "1", "gauge", "maxmemory-policy", []attribute.Key{telemetry.RedisPolicyKey}},
}

// attrSets returns the attribute sets of m's data points.
func attrSets(t *testing.T, m metricdata.Metrics) []attribute.Set {
	t.Helper()
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	return sets
}

// TestInstruments checks every instrument's name, unit, description, type
// and attribute keys after one of each event.
func TestInstruments(t *testing.T) {
	s := newSDK(t, "server-a", "game.CKHandoff", nil)
	exercise(context.Background(), s.tel)
	got := s.collect(t)
	for _, want := range instruments {
		m, ok := got[want.name]
		if !ok {
			t.Errorf("%s: not collected", want.name)
			continue
		}
		delete(got, want.name)
		if m.Unit != want.unit {
			t.Errorf("%s: unit %q, want %q", want.name, m.Unit, want.unit)
		}
		if !strings.Contains(m.Description, want.desc) || !strings.HasSuffix(m.Description, ".") {
			t.Errorf("%s: description %q should mention %q and end with a period", want.name, m.Description, want.desc)
		}
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			if want.kind != "histogram" {
				t.Errorf("%s: a histogram, want %s", want.name, want.kind)
			}
			if d.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: temporality %v", want.name, d.Temporality)
			}
		case metricdata.Histogram[int64]:
			if want.kind != "histogram" || d.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: a histogram (%v), want %s", want.name, d.Temporality, want.kind)
			}
		case metricdata.Sum[int64]:
			if (want.kind == "counter") != d.IsMonotonic || want.kind == "histogram" {
				t.Errorf("%s: sum (monotonic %v), want %s", want.name, d.IsMonotonic, want.kind)
			}
		}
		for _, set := range attrSets(t, m) {
			var keys []attribute.Key
			for _, kv := range set.ToSlice() {
				keys = append(keys, kv.Key)
			}
			wantKeys := slices.Clone(want.keys)
			if want.name == "playerdata.handoff.sent" && set.HasValue("error.type") {
				wantKeys = append(wantKeys, "error.type")
			}
			slices.Sort(keys)
			slices.Sort(wantKeys)
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("%s: attribute keys %v, want %v", want.name, keys, wantKeys)
			}
		}
	}
	for name := range got {
		t.Errorf("unexpected instrument %s", name)
	}
}

// TestMetricValues checks what the events add up to.
func TestMetricValues(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	ctx := context.Background()
	d := s.tel.Driver("PlayerData")
	defer d.RegisterProfiles(func() (int64, int64) { return 7, 2 })()
	d.JoinDone(ctx, 1500*time.Millisecond, telemetry.JoinHandoff, telemetry.JoinLoaded, nil)
	d.JoinDone(ctx, 15*time.Second, telemetry.JoinHandoff, telemetry.JoinRefused, nil)
	d.JoinDone(ctx, 5*time.Second, telemetry.JoinHandoff, telemetry.JoinRefused, nil)
	tel := s.tel
	tel.StartSend(ctx, telemetry.Message{Kind: telemetry.MsgRequest, Peer: "b"}).End(nil)
	tel.StartSend(ctx, telemetry.Message{Kind: telemetry.MsgRequest, Peer: "b"}).End(errBoom)
	tel.Fenced(ctx, 5)
	tel.Fenced(ctx, 0)
	got := s.collect(t)

	h := got["playerdata.join.duration"].Data.(metricdata.Histogram[float64])
	refused := attribute.NewSet(telemetry.DriverKey.String("PlayerData"), telemetry.JoinPathKey.String("handoff"),
		telemetry.JoinOutcomeKey.String("refused"))
	found := false
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&refused) {
			found = true
			if p.Count != 2 || p.Sum != 20 {
				t.Errorf("refused joins: count %d sum %v, want 2 and 20 s", p.Count, p.Sum)
			}
			if !slices.Contains(p.Bounds, 15) {
				t.Errorf("join buckets %v lack LockWait's 15 s", p.Bounds)
			}
		}
	}
	if !found {
		t.Errorf("no refused data point in %v", h.DataPoints)
	}
	sum := func(name string, kvs ...attribute.KeyValue) int64 {
		want := attribute.NewSet(kvs...)
		for _, p := range got[name].Data.(metricdata.Sum[int64]).DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
		t.Errorf("%s: no point %v", name, kvs)
		return -1
	}
	if v := sum("playerdata.profiles", telemetry.DriverKey.String("PlayerData"), telemetry.ProfileStateKey.String("live")); v != 7 {
		t.Errorf("live profiles %d, want 7", v)
	}
	if v := sum("playerdata.profiles", telemetry.DriverKey.String("PlayerData"), telemetry.ProfileStateKey.String("retained")); v != 2 {
		t.Errorf("retained profiles %d, want 2", v)
	}
	if v := sum("playerdata.handoff.sent", telemetry.HandoffMessageKey.String("request")); v != 1 {
		t.Errorf("requests sent %d, want 1", v)
	}
	if v := sum("playerdata.handoff.sent", telemetry.HandoffMessageKey.String("request"), attribute.String("error.type", "publish_failed")); v != 1 {
		t.Errorf("requests failed %d, want 1", v)
	}
	if v := sum("playerdata.fences"); v != 2 {
		t.Errorf("fences %d, want 2", v)
	}
	if v := sum("playerdata.fence.sessions"); v != 5 {
		t.Errorf("fenced sessions %d, want 5", v)
	}
}

// TestUnregister: an unregistered callback reports nothing more.
func TestUnregister(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	d := s.tel.Driver("PlayerData")
	calls := 0
	unreg := d.RegisterProfiles(func() (int64, int64) { calls++; return 1, 0 })
	unbus := s.tel.RegisterBus(func() telemetry.BusStats { calls++; return telemetry.BusStats{} })
	s.collect(t)
	if calls != 2 {
		t.Fatalf("%d callbacks, want 2", calls)
	}
	unreg()
	unbus()
	s.collect(t)
	if calls != 2 {
		t.Errorf("%d callbacks after unregistering, want 2", calls)
	}
}

// TestNoPlayerIDInMetrics: the player key passed to every span helper never
// reaches a metric attribute.
func TestNoPlayerIDInMetrics(t *testing.T) {
	s := newSDK(t, "server-a", "game.CKHandoff", nil)
	ctx := context.Background()
	exercise(ctx, s.tel)
	hotPath(ctx, s.tel, s.tel.Driver("PlayerData"))
	for name, m := range s.collect(t) {
		for _, set := range attrSets(t, m) {
			for _, kv := range set.ToSlice() {
				if strings.Contains(kv.Value.String(), "SECRET") {
					t.Errorf("%s carries the player key: %s=%s", name, kv.Key, kv.Value.String())
				}
			}
		}
	}
	if len(s.spans.GetSpans()) == 0 {
		t.Fatal("no spans: the key was not even passed")
	}
}

// spanOnly are the methods that may take free strings (a key, a JobID, a
// driver name): they name spans or a driver, never a metric attribute.
var spanOnly = []string{"Driver", "StartJoin", "StartWrite", "TakeoverDecision", "StartPresenceRead",
	"StartSend", "StartProcess", "End", "StartMove",
	"HandoffPublishStart", "HandoffProcessStart", "HandoffReadStart", // StartSend, StartProcess and StartPresenceRead for the Node's handoff
	"RegisterRedis", // its one string is Redis's maxmemory-policy, a configuration value
}

// TestMetricMethodsTakeNoStrings: the methods that record metrics take only
// enums, numbers, durations, contexts and errors, so no call site can put a
// player id on a metric.
func TestMetricMethodsTakeNoStrings(t *testing.T) {
	for _, v := range []any{(*telemetry.Telemetry)(nil), (*telemetry.Driver)(nil)} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			if slices.Contains(spanOnly, m.Name) {
				continue
			}
			for j := 1; j < m.Type.NumIn(); j++ {
				if in := m.Type.In(j); hasString(in) {
					t.Errorf("%s.%s takes %s", typ, m.Name, in)
				}
			}
		}
	}
}

// hasString reports whether values of typ can hold a free string.
func hasString(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.String, reflect.Interface:
		return typ.String() != "context.Context" && typ.String() != "error"
	case reflect.Struct:
		for i := range typ.NumField() {
			if hasString(typ.Field(i).Type) {
				return true
			}
		}
	case reflect.Slice, reflect.Array, reflect.Pointer:
		return hasString(typ.Elem())
	case reflect.Func:
		for i := range typ.NumIn() {
			if hasString(typ.In(i)) {
				return true
			}
		}
		for i := range typ.NumOut() {
			if hasString(typ.Out(i)) {
				return true
			}
		}
	}
	return false
}

// TestEnumsOutOfRange: a value made by conversion records nothing (every
// counter stays at the zero it starts at) and does not panic.
func TestEnumsOutOfRange(t *testing.T) {
	s := newSDK(t, "server-a", "", nil)
	ctx := context.Background()
	d := s.tel.Driver("PlayerData")
	d.JoinDone(ctx, time.Second, telemetry.JoinPath(99), telemetry.JoinLoaded, nil)
	d.WriteDone(ctx, telemetry.WriteKind(99), telemetry.WriteOK, time.Second)
	d.LockLost(ctx, telemetry.LossReason(99))
	d.Takeover(ctx, telemetry.TakeoverHow(99))
	d.MessageSent(ctx, telemetry.SendOutcome(99))
	s.tel.StartSend(ctx, telemetry.Message{Kind: telemetry.HandoffMessage(99)}).End(nil)
	s.tel.StartProcess(ctx, telemetry.Message{Kind: telemetry.HandoffMessage(99)})
	for name, m := range s.collect(t) {
		sum, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			t.Errorf("%s: recorded %v", name, m.Data)
			continue
		}
		for _, p := range sum.DataPoints {
			if p.Value != 0 {
				t.Errorf("%s%v: recorded %d, want only the zero it starts at", name, p.Attributes.ToSlice(), p.Value)
			}
		}
	}
	if got := telemetry.JoinPath(99).String(); got != "invalid" {
		t.Errorf("String of an invalid value: %q", got)
	}
}

// TestTelemetryImportsNoPublicPackage: telemetry observes the domain in its
// own terms; the public packages' types reach it only through the Node's
// translation, so no public package's change ripples into it.
func TestTelemetryImportsNoPublicPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(dep, "github.com/ckernel/playerdata/"); ok && !strings.HasPrefix(rest, "internal/") {
			t.Errorf("internal/telemetry depends on the public package %s", dep)
		}
	}
}
