package telemetry

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every meter and tracer this
// package makes (the otel_scope_name label in Prometheus).
const ScopeName = "github.com/ckernel/playerdata"

// Config makes a Telemetry.
type Config struct {
	// MeterProvider makes the meter of every instrument.
	// default: otel.GetMeterProvider() (a no-op until the application
	// installs an SDK; instruments made before that start recording once it
	// does)
	MeterProvider metric.MeterProvider
	// TracerProvider makes the tracer of every span.
	// default: otel.GetTracerProvider() (likewise)
	TracerProvider trace.TracerProvider
	// JobID is this server, set on its spans as playerdata.job (never on a
	// metric: a server's metrics are told apart by the scrape's instance
	// label, or by the resource's service.instance.id).
	JobID string
	// NATSPrefix is the subject prefix of the NATS bus, namespace included
	// ("mygame.CKHandoff"): a server's subject is NATSPrefix + "." + JobID.
	// When set, handoff message spans carry OTel's messaging attributes
	// (messaging.system "nats", the subject as messaging.destination.name);
	// when empty (a bus other than NATS) they carry only ours.
	NATSPrefix string
}

// Telemetry is the instrumentation of one Node: its instruments, made once,
// and its tracer. Make it with New; a nil *Telemetry is valid and does
// nothing, as do the *Driver and span handles it hands out. It is safe for
// concurrent use.
type Telemetry struct {
	tracer trace.Tracer
	// tracing is set once spans are worth making: the tracer is not a no-op.
	// While it is unset, every span helper returns at once, without
	// allocating.
	tracing atomic.Bool
	// global is the global TracerProvider New found to be a no-op (nil when
	// the Config named one, or it was not a no-op): a provider installed
	// later turns tracing on, since the tracer delegates to it.
	global trace.TracerProvider

	jobID      string
	jobAttr    attribute.KeyValue
	natsPrefix string
	natsAttrs  []attribute.KeyValue // messaging.system and template; nil without NATS
	ownSubject string               // NATSPrefix.JobID

	meter metric.Meter

	joinDuration    metric.Float64Histogram
	moveDuration    metric.Float64Histogram
	writeDuration   metric.Float64Histogram
	profiles        metric.Int64ObservableUpDownCounter
	lockLosses      metric.Int64Counter
	takeovers       metric.Int64Counter
	messagesSent    metric.Int64Counter
	messagesApplied metric.Int64Counter
	handoffSent     metric.Int64Counter
	handoffReceived metric.Int64Counter
	fences          metric.Int64Counter
	fenceSessions   metric.Int64Counter
	busDropped      metric.Int64ObservableCounter
	busConn         metric.Int64ObservableCounter
	deadLettered    metric.Int64Counter
	redisUsed       metric.Int64ObservableGauge
	redisLimit      metric.Int64ObservableGauge
	redisPolicy     metric.Int64ObservableGauge
	historyBytes    metric.Int64Histogram
	historyTrimmed  metric.Int64Counter

	// Precomputed attribute options of the Node-level instruments, indexed
	// by their enums: [message][failed].
	sent     [handoffMessages][2]opts
	received [handoffMessages]opts
	none     opts
	drops    [dropReasons]opts
	events   [busEventCount]opts
}

// New makes the Telemetry of a Node: every instrument, once. It never
// fails: an instrument the provider refuses is reported to otel.Handle and
// replaced by the provider's (usually no-op) fallback, since instrumentation
// must not stop a game server.
func New(cfg Config) *Telemetry {
	t := &Telemetry{jobID: cfg.JobID, jobAttr: JobKey.String(cfg.JobID), natsPrefix: cfg.NATSPrefix}
	if cfg.NATSPrefix != "" {
		t.natsAttrs = []attribute.KeyValue{
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationTemplate(cfg.NATSPrefix + ".{job}"),
		}
		t.ownSubject = cfg.NATSPrefix + "." + cfg.JobID
	}
	t.initTracing(cfg.TracerProvider)
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t.meter = mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	if err := t.initInstruments(); err != nil {
		otel.Handle(err)
	}
	t.none = newOpts()
	for m := range handoffMessages {
		k := HandoffMessageKey.String(m.String())
		t.sent[m][0] = newOpts(k)
		t.sent[m][1] = newOpts(k, errorTypeKey.String("publish_failed"))
		t.received[m] = newOpts(k)
	}
	for r := range dropReasons {
		t.drops[r] = newOpts(DropReasonKey.String(r.String()))
	}
	for e := range busEventCount {
		t.events[e] = newOpts(BusEventKey.String(e.String()))
	}
	t.startAtZero()
	return t
}

// startAtZero adds 0 to every series of the Node's counters, so that each
// is exported from the start (a dashboard panel of fences shows a flat 0,
// not "No data", until the first fence). The bus counters are observed at
// every collection and need nothing. With the global provider before an
// SDK is installed the zeros go nowhere; the series then appear at their
// first event.
func (t *Telemetry) startAtZero() {
	ctx := context.Background()
	for m := range handoffMessages {
		t.handoffSent.Add(ctx, 0, t.sent[m][0].add...)
		t.handoffSent.Add(ctx, 0, t.sent[m][1].add...)
		t.handoffReceived.Add(ctx, 0, t.received[m].add...)
	}
	t.fences.Add(ctx, 0, t.none.add...)
	t.fenceSessions.Add(ctx, 0, t.none.add...)
}

// initTracing makes the tracer and decides whether spans are worth making.
// A no-op tracer (trace/noop, or the global one before an SDK is installed)
// starts spans whose SpanContext is invalid; any SDK gives every span a
// valid one, sampled or not. The probe span is never ended, so no SDK
// exports it.
func (t *Telemetry) initTracing(tp trace.TracerProvider) {
	explicit := tp != nil
	if !explicit {
		tp = otel.GetTracerProvider()
	}
	t.tracer = tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))
	_, probe := t.tracer.Start(context.Background(), "playerdata.probe")
	if probe.SpanContext().IsValid() {
		t.tracing.Store(true)
		return
	}
	if !explicit && reflect.TypeOf(tp).Comparable() {
		t.global = tp
	}
}

// tracingOn reports whether span helpers should make spans: the tracer was
// not a no-op, or the global provider it came from has been replaced since
// (an SDK installed after New; the tracer delegates to it).
func (t *Telemetry) tracingOn() bool {
	if t == nil {
		return false
	}
	if t.tracing.Load() {
		return true
	}
	if t.global == nil || otel.GetTracerProvider() == t.global {
		return false
	}
	t.tracing.Store(true)
	return true
}

// initInstruments makes every instrument; errors are joined (each
// instrument is usable anyway).
func (t *Telemetry) initInstruments() error {
	m := t.meter
	// Seconds-scale bucket boundaries: joins run from a fraction of a
	// millisecond (a free lock) to LockWait (15 s) and a crash takeover (10
	// to 15 s); writes up to SaveTimeout (10 s). They are advisories the SDK
	// applies unless a View overrides them.
	joinBuckets := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 12.5, 15, 20, 30}
	writeBuckets := []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	var errs [20]error
	t.joinDuration, errs[0] = m.Float64Histogram("playerdata.join.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of joins (Driver.Join), from the call to the profile handed out or the error, by how the lock was obtained and how the join ended."),
		metric.WithExplicitBucketBoundaries(joinBuckets...))
	t.writeDuration, errs[1] = m.Float64Histogram("playerdata.write.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of record writes (one save.lua round trip: saves, autosaves, leave saves, lock refreshes, adoptions, give-backs), by kind and outcome."),
		metric.WithExplicitBucketBoundaries(writeBuckets...))
	t.profiles, errs[2] = m.Int64ObservableUpDownCounter("playerdata.profiles",
		metric.WithUnit("{profile}"),
		metric.WithDescription("Profiles this server holds: live (a session is using it) or retained (its leave save failed; it still holds the lock and retries)."))
	t.lockLosses, errs[3] = m.Int64Counter("playerdata.lock.losses",
		metric.WithUnit("{session}"),
		metric.WithDescription("Sessions ended with ErrLockLost, by reason."))
	t.takeovers, errs[4] = m.Int64Counter("playerdata.takeovers",
		metric.WithUnit("{lock}"),
		metric.WithDescription("Locks taken from a holder that did not release them: proven stopped, stale by age, or left by an earlier run of this JobID."))
	t.messagesSent, errs[5] = m.Int64Counter("playerdata.messages.sent",
		metric.WithUnit("{message}"),
		metric.WithDescription("Profile messages sent with Driver.Send, by outcome."))
	t.messagesApplied, errs[6] = m.Int64Counter("playerdata.messages.applied",
		metric.WithUnit("{message}"),
		metric.WithDescription("Profile messages applied to a profile (OnMessage returned nil)."))
	t.handoffSent, errs[7] = m.Int64Counter("playerdata.handoff.sent",
		metric.WithUnit("{message}"),
		metric.WithDescription("Handoff messages this server published (release requests, replies, inbox notifies); error.type is set on the ones whose publish failed."))
	t.handoffReceived, errs[8] = m.Int64Counter("playerdata.handoff.received",
		metric.WithUnit("{message}"),
		metric.WithDescription("Handoff messages this server received and acted on."))
	t.fences, errs[9] = m.Int64Counter("playerdata.fences",
		metric.WithUnit("{fence}"),
		metric.WithDescription("Times this server's presence lease lapsed and it fenced itself off, ending the sessions held under it."))
	t.fenceSessions, errs[10] = m.Int64Counter("playerdata.fence.sessions",
		metric.WithUnit("{session}"),
		metric.WithDescription("Sessions ended by fences (each is also a lock loss with reason lease_lapsed)."))
	t.busDropped, errs[11] = m.Int64ObservableCounter("playerdata.bus.dropped",
		metric.WithUnit("{message}"),
		metric.WithDescription("Messages that reached this server and were dropped, by reason."))
	t.busConn, errs[12] = m.Int64ObservableCounter("playerdata.bus.connection.events",
		metric.WithUnit("{event}"),
		metric.WithDescription("Bus connection events: disconnect (requests to this server go unanswered until reconnect), reconnect, close."))
	t.deadLettered, errs[13] = m.Int64Counter("playerdata.messages.dead_lettered",
		metric.WithUnit("{message}"),
		metric.WithDescription("Profile messages moved to the dead letters after OnMessage refused them MaxMessageAttempts times."))
	t.redisUsed, errs[14] = m.Int64ObservableGauge("playerdata.redis.memory.used",
		metric.WithUnit("By"),
		metric.WithDescription("Memory Redis uses (INFO memory used_memory; on a Cluster, the fullest master's), read every minute."))
	t.redisLimit, errs[15] = m.Int64ObservableGauge("playerdata.redis.memory.limit",
		metric.WithUnit("By"),
		metric.WithDescription("Redis's maxmemory (0: none; on a Cluster, the fullest master's), read every minute."))
	t.redisPolicy, errs[16] = m.Int64ObservableGauge("playerdata.redis.eviction",
		metric.WithUnit("1"),
		metric.WithDescription("1 while Redis's maxmemory-policy may evict keys (allkeys-* evicts the library's records; volatile-* only keys with a TTL), else 0; the policy is an attribute."))
	t.historyBytes, errs[17] = m.Int64Histogram("playerdata.history.bytes",
		metric.WithUnit("By"),
		metric.WithDescription("Redis bytes of one profile's kept versions after a write that kept one (bounded by Config.HistoryBytes)."),
		metric.WithExplicitBucketBoundaries(1<<10, 4<<10, 16<<10, 64<<10, 256<<10, 1<<20, 4<<20, 16<<20, 64<<20, 256<<20))
	t.historyTrimmed, errs[18] = m.Int64Counter("playerdata.history.trimmed",
		metric.WithUnit("{version}"),
		metric.WithDescription("Kept versions trimmed, oldest first, by why: beyond History (count) or beyond HistoryBytes (bytes)."))
	t.moveDuration, errs[19] = m.Float64Histogram("playerdata.move.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of moves (Profile.MoveTo), from the call to the flip landed or the error, by how the move ended."),
		metric.WithExplicitBucketBoundaries(writeBuckets...))
	return errors.Join(errs[:]...)
}

// opts are the measurement options of one precomputed attribute set, in
// each of the shapes the instruments take, so that recording passes a
// slice made once instead of building one per call.
type opts struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

// newOpts precomputes the options for the attribute set of kvs.
func newOpts(kvs ...attribute.KeyValue) opts {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return opts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// noUnregister is what a registration on a nil receiver returns.
func noUnregister() {}
