// Package telemetry is the OpenTelemetry instrumentation of playerdata: the
// metrics an operator on call reads and the traces of joins, so that what
// the library does can be seen without reading its source.
//
// # Shape
//
// A Node makes one *Telemetry with New, from NodeConfig.MeterProvider and
// NodeConfig.TracerProvider (nil means the global providers, which do
// nothing until the application installs an SDK, and start working when it
// does). Every instrument is made there, once. Each driver gets a *Driver
// from Telemetry.Driver, which precomputes the attribute sets of its
// metrics. Every event is a typed method whose attributes come from enums
// (JoinPath, WriteOutcome, LossReason, …), so a call site is one line and
// cannot put a player id, a token or any other free string on a metric:
// metric attributes are driver names and enum values only, and player keys
// appear on spans only.
//
// The Node's lockhandoff.Handoff records through Telemetry.HandoffTrace, a
// lockhandoff.Trace over the same instruments and spans, so lockhandoff
// itself knows nothing of this package.
//
// A nil *Telemetry, a nil *Driver and the zero value of every span handle
// (AcquireSpan, WriteSpan, PresenceSpan, SendSpan, ProcessSpan) are valid
// and do nothing, so code under test needs no telemetry at all.
//
// # Cost with no SDK
//
// With no SDK installed nothing allocates. Metrics record with attribute
// sets made once (metric.WithAttributeSet in a slice built at start-up), and
// a no-op or not-yet-delegated instrument returns at once. Span helpers check
// one atomic flag first: New probes the tracer once (a no-op tracer starts
// spans without a valid SpanContext; any SDK gives every span one, sampled
// or not) and, for the global provider, notices one installed later by one
// atomic load. BenchmarkNoop measures it.
//
// # Traces
//
// A join is a span "join <driver>" (StartJoin … JoinDone) whose children are
// its acquire attempts ("EVALSHA acquire"), its release requests ("publish
// <subject>"), the presence reads of the holder ("EVALSHA presence.read"),
// the takeover decision, and on the holder, through the traceparent the
// request carries, the processing of the request ("process <subject>"), the
// release save ("EVALSHA save") and the reply. Redis spans follow OTel's
// database conventions (db.system.name "redis", db.operation.name,
// db.query.summary as the span name); bus spans follow the messaging ones
// (messaging.system "nats", messaging.operation.type "send"/"process",
// messaging.destination.name the subject).
//
// The join's state lives in its context (only while tracing is on), so the
// helpers deep in an acquire or a lockhandoff wait find it without new
// parameters.
//
// # Joins that waited are always kept
//
// A head sampler decides at a span's start; a join starts before anyone
// knows it will wait. StartWait, called when it does, marks it: a sampled
// join span gets playerdata.wait=true, an unsampled one gets a stand-in: a
// new root span of the same name, backdated to the join's start, linked to
// the join span, with playerdata.wait=true from its start, under which the
// latest acquire attempt is replayed and every later span of the join is
// started. The sampler KeepWaits of the public package
// github.com/ckernel/playerdata/sampling (apart, so that this one does not
// import the SDK) always samples a span that starts with that attribute,
// whatever its parent decided, so every join that waited is traced whole at
// any base sampling rate.
//
// # Trace context on the bus
//
// Inject and Extract carry a span context in a message's TraceParent and
// TraceState (W3C Trace Context). SendSpan.TraceContext gives the values for
// a message being published; StartProcess makes the receiver's span a child
// of the sender's.
//
// # Metrics
//
// Names are under playerdata., in base units (seconds); Prometheus shows
// them with dots as underscores, the unit as a suffix and _total on
// counters (TestPrometheusNames checks every one):
//
//	playerdata_join_duration_seconds       histogram  driver, join.path, join.outcome
//	playerdata_write_duration_seconds      histogram  driver, write.kind, write.outcome
//	playerdata_profiles                    gauge      driver, profile.state (live, retained)
//	playerdata_lock_losses_total           counter    driver, loss.reason
//	playerdata_takeovers_total             counter    driver, takeover.how
//	playerdata_messages_sent_total         counter    driver, message.outcome
//	playerdata_messages_applied_total      counter    driver
//	playerdata_handoff_sent_total          counter    handoff.message, error.type on failures
//	playerdata_handoff_received_total      counter    handoff.message
//	playerdata_fences_total                counter
//	playerdata_fence_sessions_total        counter
//	playerdata_bus_dropped_total           counter    drop.reason
//	playerdata_bus_connection_events_total counter    bus.event
//
// (attribute keys shown without their playerdata. prefix).
package telemetry
