package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ckernel/playerdata/internal/redismem"
)

// Driver is the instrumentation of one driver (one profile kind) of a Node:
// its metrics carry the driver's name, and its spans the player's key. Get
// it from Telemetry.Driver once, when the driver is made. A nil *Driver is
// valid and does nothing.
type Driver struct {
	t          *Telemetry
	name       string
	driverAttr attribute.KeyValue
	joinName   string // "join <name>", the join span's name

	join     [joinPaths][joinOutcomes]opts
	move     [moveOutcomes]opts
	write    [writeKinds][writeOutcomes]opts
	loss     [lossReasons]opts
	takeover [takeoverHows]opts
	sent     [sendOutcomes]opts
	applied  opts
	trimmed  [2]opts // by count, by bytes
	live     opts
	retained opts
}

// Driver returns the instrumentation of the driver named name (its
// Config.Name): every attribute set of its metrics is computed here, once.
// A nil Telemetry returns a nil *Driver.
func (t *Telemetry) Driver(name string) *Driver {
	if t == nil {
		return nil
	}
	dk := DriverKey.String(name)
	d := &Driver{t: t, name: name, driverAttr: dk, joinName: "join " + name}
	for p := range joinPaths {
		for o := range joinOutcomes {
			d.join[p][o] = newOpts(dk, JoinPathKey.String(p.String()), JoinOutcomeKey.String(o.String()))
		}
	}
	for o := range moveOutcomes {
		d.move[o] = newOpts(dk, MoveOutcomeKey.String(o.String()))
	}
	for k := range writeKinds {
		for o := range writeOutcomes {
			d.write[k][o] = newOpts(dk, WriteKindKey.String(k.String()), WriteOutcomeKey.String(o.String()))
		}
	}
	for r := range lossReasons {
		d.loss[r] = newOpts(dk, LossReasonKey.String(r.String()))
	}
	for h := range takeoverHows {
		d.takeover[h] = newOpts(dk, TakeoverKey.String(h.String()))
	}
	for o := range sendOutcomes {
		d.sent[o] = newOpts(dk, SendOutcomeKey.String(o.String()))
	}
	d.applied = newOpts(dk)
	d.trimmed = [2]opts{newOpts(dk, HistoryTrimKey.String("count")), newOpts(dk, HistoryTrimKey.String("bytes"))}
	d.live = newOpts(dk, ProfileStateKey.String("live"))
	d.retained = newOpts(dk, ProfileStateKey.String("retained"))
	d.startAtZero()
	return d
}

// startAtZero adds 0 to every series of the driver's counters (lock losses
// by reason, takeovers by how, messages sent by outcome, messages applied),
// so that each is exported from the start: see Telemetry.startAtZero.
func (d *Driver) startAtZero() {
	ctx := context.Background()
	for r := range lossReasons {
		d.t.lockLosses.Add(ctx, 0, d.loss[r].add...)
	}
	for h := range takeoverHows {
		d.t.takeovers.Add(ctx, 0, d.takeover[h].add...)
	}
	for o := range sendOutcomes {
		d.t.messagesSent.Add(ctx, 0, d.sent[o].add...)
	}
	d.t.messagesApplied.Add(ctx, 0, d.applied.add...)
	d.t.deadLettered.Add(ctx, 0, d.applied.add...)
	for i := range d.trimmed {
		d.t.historyTrimmed.Add(ctx, 0, d.trimmed[i].add...)
	}
}

// HistoryKept records a write that kept a version: the bytes the kept
// versions take after it (playerdata.history.bytes) and the versions it
// trimmed beyond the count and beyond the byte budget
// (playerdata.history.trimmed).
func (d *Driver) HistoryKept(ctx context.Context, bytes int, trimmedCount, trimmedBytes int) {
	if d == nil {
		return
	}
	d.t.historyBytes.Record(ctx, int64(bytes), d.applied.rec...)
	for i, n := range [2]int{trimmedCount, trimmedBytes} {
		if n > 0 {
			d.t.historyTrimmed.Add(ctx, int64(n), d.trimmed[i].add...)
		}
	}
}

// WriteDone records a write of kind that ended with outcome after d
// (playerdata.write.duration). StartWrite's WriteSpan.End calls it; call it
// directly only for a write without a span.
func (d *Driver) WriteDone(ctx context.Context, kind WriteKind, outcome WriteOutcome, dur time.Duration) {
	if d == nil || kind >= writeKinds || outcome >= writeOutcomes {
		return
	}
	d.t.writeDuration.Record(ctx, dur.Seconds(), d.write[kind][outcome].rec...)
}

// LockLost counts a session that ended with ErrLockLost
// (playerdata.lock.losses) and adds a "lock lost" event to the span in ctx.
func (d *Driver) LockLost(ctx context.Context, reason LossReason) {
	if d == nil || reason >= lossReasons {
		return
	}
	d.t.lockLosses.Add(ctx, 1, d.loss[reason].add...)
	if d.t.tracingOn() {
		trace.SpanFromContext(ctx).AddEvent("lock lost", trace.WithAttributes(LossReasonKey.String(reason.String())))
	}
}

// Takeover counts a lock taken from a holder that did not release it
// (playerdata.takeovers) and adds a "takeover" event to the span in ctx.
// Call it when an acquire answers record.TakenStolen, TakenExpired or
// TakenOwn.
func (d *Driver) Takeover(ctx context.Context, how TakeoverHow) {
	if d == nil || how >= takeoverHows {
		return
	}
	d.t.takeovers.Add(ctx, 1, d.takeover[how].add...)
	if d.t.tracingOn() {
		parent(ctx).AddEvent("takeover", trace.WithAttributes(TakeoverKey.String(how.String())))
	}
}

// MessageSent counts one Driver.Send (playerdata.messages.sent).
func (d *Driver) MessageSent(ctx context.Context, outcome SendOutcome) {
	if d == nil || outcome >= sendOutcomes {
		return
	}
	d.t.messagesSent.Add(ctx, 1, d.sent[outcome].add...)
}

// MessagesApplied counts n profile messages applied to a profile
// (playerdata.messages.applied).
func (d *Driver) MessagesApplied(ctx context.Context, n int) {
	if d == nil || n <= 0 {
		return
	}
	d.t.messagesApplied.Add(ctx, int64(n), d.applied.add...)
}

// RegisterProfiles makes f the source of the driver's playerdata.profiles
// gauge: the SDK calls it at each collection (on its own goroutine, so f
// must be safe for concurrent use and should only read counters). It returns
// the function that unregisters f; call it when the driver shuts down.
func (d *Driver) RegisterProfiles(f func() (live, retained int64)) (unregister func()) {
	if d == nil || f == nil {
		return noUnregister
	}
	g := d.t.profiles
	reg, err := d.t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		live, retained := f()
		o.ObserveInt64(g, live, d.live.obs...)
		o.ObserveInt64(g, retained, d.retained.obs...)
		return nil
	}, g)
	if err != nil {
		otel.Handle(err)
		return noUnregister
	}
	return func() {
		if err := reg.Unregister(); err != nil {
			otel.Handle(err)
		}
	}
}

// Fenced counts one lapse of this server's presence lease, which ended
// sessions sessions (playerdata.fences, playerdata.fence.sessions), and adds
// a "fenced" event to the span in ctx. Each of those sessions is also a
// LockLost with LossLeaseLapsed.
func (t *Telemetry) Fenced(ctx context.Context, sessions int) {
	if t == nil {
		return
	}
	t.fences.Add(ctx, 1, t.none.add...)
	if sessions > 0 {
		t.fenceSessions.Add(ctx, int64(sessions), t.none.add...)
	}
	if t.tracingOn() {
		trace.SpanFromContext(ctx).AddEvent("fenced", trace.WithAttributes(FencedSessionsKey.Int(sessions)))
	}
}

// BusStats are the bus's counters since it was made, as
// messaging.NATSBus.Stats and lockhandoff.Stats count them: cumulative,
// never reset.
type BusStats struct {
	// Dropped counts the messages dropped, by reason: DroppedMalformed,
	// DroppedTooLarge, DroppedUnknownType and DroppedUnauthenticated of
	// messaging.Stats, DroppedUnknownDriver of lockhandoff.Stats.
	Dropped [dropReasons]uint64
	// Events counts the connection's events, by BusEvent: Disconnects,
	// Reconnects and Closes of messaging.Stats.
	Events [busEventCount]uint64
}

// MessagesDeadLettered counts messages a write moved to the dead letters
// (playerdata.messages.dead_lettered).
func (d *Driver) MessagesDeadLettered(ctx context.Context, n int) {
	if d == nil || n <= 0 {
		return
	}
	d.t.deadLettered.Add(ctx, int64(n), d.applied.add...)
}

// RedisMemory is what a Node last read of Redis's memory.
type RedisMemory = redismem.Memory

// RegisterRedis makes f the source of the playerdata.redis.* gauges, read
// at each collection.
func (t *Telemetry) RegisterRedis(f func() RedisMemory) (unregister func()) {
	if t == nil || f == nil {
		return noUnregister
	}
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := f()
		if !s.Known {
			return nil
		}
		o.ObserveInt64(t.redisUsed, s.Used)
		o.ObserveInt64(t.redisLimit, s.Limit)
		v := int64(0)
		if s.Evicting {
			v = 1
		}
		o.ObserveInt64(t.redisPolicy, v, metric.WithAttributes(RedisPolicyKey.String(s.Policy)))
		return nil
	}, t.redisUsed, t.redisLimit, t.redisPolicy)
	if err != nil {
		otel.Handle(err)
		return noUnregister
	}
	return func() {
		if err := reg.Unregister(); err != nil {
			otel.Handle(err)
		}
	}
}

// RegisterBus makes f the source of playerdata.bus.dropped and
// playerdata.bus.connection.events: the SDK calls it at each collection (on
// its own goroutine) and reports its cumulative counts. The bus counts these
// already (messaging imports nothing of ours), so they are read, not pushed.
// It returns the function that unregisters f; call it when the Node closes.
func (t *Telemetry) RegisterBus(f func() BusStats) (unregister func()) {
	if t == nil || f == nil {
		return noUnregister
	}
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := f()
		for r := range dropReasons {
			o.ObserveInt64(t.busDropped, int64(s.Dropped[r]), t.drops[r].obs...)
		}
		for e := range busEventCount {
			o.ObserveInt64(t.busConn, int64(s.Events[e]), t.events[e].obs...)
		}
		return nil
	}, t.busDropped, t.busConn)
	if err != nil {
		otel.Handle(err)
		return noUnregister
	}
	return func() {
		if err := reg.Unregister(); err != nil {
			otel.Handle(err)
		}
	}
}
