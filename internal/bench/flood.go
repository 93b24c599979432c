package bench

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/messaging"
)

// Flood is the handoff while a peer on the NATS server floods the servers'
// subjects, without RequestKey and with it. Four servers: A and B hand one
// profile back and forth (as in the handoff measurement) and hold
// bystander profiles; W joins a profile that D holds, and D, live, never
// answers (it listens on another subject prefix), so W waits its whole
// LockWait. Each run times the handoffs and W's wait twice in a row, quiet
// and then under the flood: FloodRate messages a second (a tenth of it under
// the race detector) from a publisher on its own connection, for at most
// floodPhaseMax of handoffs.
//
// The flood without a key: release requests to A naming the profile
// handed over, the bystanders and unheld keys, with random tokens, half of
// them from one forged requester (whose subject counts the replies A sends
// it) and half from a thousand others; and one message in five a reply to
// W naming the key it waits for. With a key, every server signs: the flood
// is the same forged messages (unsigned) and, for half of it, replays of
// the signed messages a listener captured during the quiet handoffs.
type Flood struct {
	TargetPerS int      `json:"target_per_s"`
	WithoutKey FloodRun `json:"without_key"`
	WithKey    FloodRun `json:"with_key"`
}

// FloodRun is one flood, without RequestKey or with it.
type FloodRun struct {
	RequestKey bool `json:"request_key"`
	// PublishedPerS is the rate the publisher reached; ReceivedPerS the
	// rate at which messages reached A's connection; FloodS how long the
	// flood lasted.
	PublishedPerS float64 `json:"published_per_s"`
	ReceivedPerS  float64 `json:"received_per_s"`
	FloodS        float64 `json:"flood_s"`
	// Quiet and Flooded are the handoffs' latencies (Join's call to its
	// return) without and under the flood.
	Quiet   Latency `json:"quiet"`
	Flooded Latency `json:"flooded"`
	// The process's peak goroutines and live heap, without and under the
	// flood (every server runs in this process).
	GoroutinesQuiet   int     `json:"goroutines_quiet"`
	GoroutinesFlooded int     `json:"goroutines_flooded"`
	HeapQuietMiB      float64 `json:"heap_quiet_mib"`
	HeapFloodedMiB    float64 `json:"heap_flooded_mib"`
	// ScriptsWaitQuiet and ScriptsWaitFlooded are the Redis scripts W's
	// waiting join ran (acquires, presence reads) in its LockWait.
	ScriptsWaitQuiet   int `json:"scripts_wait_quiet"`
	ScriptsWaitFlooded int `json:"scripts_wait_flooded"`
	// HolderRedisPerS is the Redis round trips a second of A and B under
	// the flood (handoffs, beats, and whatever the flood makes them do).
	HolderRedisPerS float64 `json:"holder_redis_per_s"`
	// RepliesToForged is how many replies reached the forged requester's
	// subject during the flood.
	RepliesToForged int `json:"replies_to_forged"`
	// SessionsEnded is how many bystander sessions ended during the run
	// (the flood must end none).
	SessionsEnded int `json:"sessions_ended"`
}

// The flood's settings.
const (
	// FloodRate is the flood's target, messages a second.
	FloodRate = 20_000
	// floodWait is W's LockWait: long enough for several parks.
	floodWait = 3 * time.Second
	// floodBystanders is how many profiles A and B each hold throughout.
	floodBystanders = 20
	// floodRing is how many distinct messages the publisher cycles through.
	floodRing = 8192
	// floodForged is the requester name of half the forged requests.
	floodForged = "forged-requester"
	// floodPhaseMax ends the handoffs of a phase early: a flood the servers
	// cannot keep up with makes NATS drop genuine requests, repeated only
	// every RequestRepeat (4 s).
	floodPhaseMax = 30 * time.Second
)

// floodSpec is one flood run's settings.
type floodSpec struct {
	rate     int
	handoffs int // timed quiet and again flooded
	wait     time.Duration
	key      bool
}

// floodRate is the rate a run floods at: FloodRate, or a tenth of it under
// the race detector, whose servers handle a tenth of what they do without
// it (a test looks for races on the flood's paths, not for an overload).
func floodRate() int {
	if raceDetector {
		return FloodRate / 10
	}
	return FloodRate
}

// runFlood fills Result.Flood: a run without a key, then one with.
func (r *runner) runFlood(ctx context.Context) error {
	r.res.Flood.TargetPerS = floodRate()
	for _, key := range []bool{false, true} {
		fr, err := r.floodRun(ctx, floodSpec{rate: floodRate(), handoffs: max(r.cfg.Handoffs/5, 100), wait: floodWait, key: key})
		if err != nil {
			return err
		}
		if key {
			r.res.Flood.WithKey = fr
		} else {
			r.res.Flood.WithoutKey = fr
		}
		r.progress("  key %v: %.0f msg/s published, %.0f/s reached A; handoffs p90 %.2f ms quiet, %.2f ms flooded (max %.1f); goroutines %d → %d, heap %.1f → %.1f MiB; waiting join %d → %d scripts; %d replies to the forged requester; %d sessions ended",
			key, fr.PublishedPerS, fr.ReceivedPerS, fr.Quiet.P90MS, fr.Flooded.P90MS, fr.Flooded.MaxMS, fr.GoroutinesQuiet,
			fr.GoroutinesFlooded, fr.HeapQuietMiB, fr.HeapFloodedMiB, fr.ScriptsWaitQuiet, fr.ScriptsWaitFlooded,
			fr.RepliesToForged, fr.SessionsEnded)
	}
	return nil
}

// floodWorld is the four servers of a flood run and what watches them.
type floodWorld struct {
	a, b, deaf, w *handoffServer
	prefix        string // the subject prefix of A, B and W
	scripts       *scriptCounter
	bystanders    []*datadriver.Profile[profileData]
	hot           *datadriver.Profile[profileData]
}

// floodRun measures one flood.
func (r *runner) floodRun(ctx context.Context, spec floodSpec) (fr FloodRun, err error) {
	fr.RequestKey = spec.key
	ns := r.ns("flood")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	fw, err := r.startFloodWorld(ctx, ns, spec)
	if err != nil {
		return fr, err
	}
	defer fw.close(ctx)
	pub, err := nats.Connect(r.env.NATSURL, nats.Name("playerdata bench flood"))
	if err != nil {
		return fr, fmt.Errorf("connect the flood publisher: %w", err)
	}
	defer pub.Close()
	listened := &capture{max: floodRing / 2}
	listen, err := pub.Subscribe(fw.prefix+".>", listened.record)
	if err != nil {
		return fr, fmt.Errorf("listen on the bus: %w", err)
	}
	if err := pub.Flush(); err != nil {
		return fr, fmt.Errorf("flush the listener: %w", err)
	}

	quiet, err := fw.phase(ctx, spec, nil)
	if err != nil {
		return fr, fmt.Errorf("quiet: %w", err)
	}
	_ = listen.Unsubscribe()
	msgs, err := fw.floodMessages(spec, listened.captured())
	if err != nil {
		return fr, err
	}
	var replies atomic.Int64
	reflected, err := pub.Subscribe(fw.prefix+"."+floodForged, func(*nats.Msg) { replies.Add(1) })
	if err != nil {
		return fr, fmt.Errorf("subscribe the forged requester: %w", err)
	}
	defer func() { _ = reflected.Unsubscribe() }()
	if err := pub.Flush(); err != nil {
		return fr, fmt.Errorf("flush the forged requester: %w", err)
	}
	flooded, err := fw.phase(ctx, spec, func() *floodPublisher { return startFlood(pub, msgs, spec.rate) })
	if err != nil {
		return fr, fmt.Errorf("flooded: %w", err)
	}
	fr.Quiet, fr.GoroutinesQuiet, fr.HeapQuietMiB, fr.ScriptsWaitQuiet = quiet.latency, quiet.goroutines, quiet.heapMiB, quiet.scripts
	fr.Flooded, fr.GoroutinesFlooded, fr.HeapFloodedMiB, fr.ScriptsWaitFlooded = flooded.latency, flooded.goroutines,
		flooded.heapMiB, flooded.scripts
	fr.PublishedPerS, fr.FloodS = round1(flooded.publishedPerS), round3(flooded.took.Seconds())
	fr.ReceivedPerS = round1(float64(flooded.received) / flooded.took.Seconds())
	fr.HolderRedisPerS = round1(float64(flooded.holderCalls) / flooded.took.Seconds())
	_ = pub.Flush()
	fr.RepliesToForged = int(replies.Load())
	fr.SessionsEnded = fw.sessionsEnded()
	return fr, nil
}

// startFloodWorld starts the four servers, A holding the profile handed
// over and A and B their bystanders, D the profile W will wait for.
func (r *runner) startFloodWorld(ctx context.Context, ns string, spec floodSpec) (fw *floodWorld, err error) {
	var key []byte
	if spec.key {
		key = make([]byte, 32)
		_, _ = crand.Read(key)
	}
	fw = &floodWorld{prefix: ns + "." + messaging.DefaultPrefix, scripts: &scriptCounter{}}
	defer func() {
		if err != nil {
			fw.close(ctx)
		}
	}()
	signs := func(c *datadriver.NodeConfig) { c.RequestKey = key }
	id := randomID()
	if fw.a, err = r.startServer(ctx, ns, "flood-a-"+id, signs, nil); err != nil {
		return fw, err
	}
	if fw.b, err = r.startServer(ctx, ns, "flood-b-"+id, signs, nil); err != nil {
		return fw, err
	}
	deaf := func(c *datadriver.NodeConfig) { signs(c); c.SubjectPrefix = "deaf" }
	if fw.deaf, err = r.startServer(ctx, ns, "flood-d-"+id, deaf, nil); err != nil {
		return fw, err
	}
	counted := func(c *datadriver.NodeConfig) { signs(c); c.Redis.AddHook(fw.scripts) }
	waits := func(c *datadriver.Config[profileData]) { c.LockWait = spec.wait }
	if fw.w, err = r.startServer(ctx, ns, "flood-w-"+id, counted, waits); err != nil {
		return fw, err
	}
	if _, err = fw.deaf.drv.Join(ctx, "parked"); err != nil {
		return fw, err
	}
	for i := range floodBystanders {
		for name, s := range map[string]*handoffServer{"a": fw.a, "b": fw.b} {
			p, err := s.drv.Join(ctx, fmt.Sprintf("by-%s-%d", name, i))
			if err != nil {
				return fw, err
			}
			fw.bystanders = append(fw.bystanders, p)
		}
	}
	fw.hot, err = fw.a.drv.Join(ctx, "hot")
	return fw, err
}

// close closes the servers started.
func (fw *floodWorld) close(ctx context.Context) {
	for _, s := range []*handoffServer{fw.w, fw.deaf, fw.b, fw.a} {
		if s != nil {
			s.close(ctx)
		}
	}
}

// sessionsEnded counts the bystander sessions that ended.
func (fw *floodWorld) sessionsEnded() int {
	n := 0
	for _, p := range fw.bystanders {
		select {
		case <-p.Done():
			n++
		default:
		}
	}
	return n
}

// floodMessages is the ring the publisher cycles through: the forged
// messages, and with a key, replays of what the listener captured for half
// of it.
func (fw *floodWorld) floodMessages(spec floodSpec, captured []rawMessage) ([]rawMessage, error) {
	keys := []string{"hot"}
	for i := range floodBystanders {
		keys = append(keys, fmt.Sprintf("by-a-%d", i), fmt.Sprintf("by-b-%d", i))
	}
	n := floodRing
	if spec.key && len(captured) > 0 {
		n /= 2
	}
	rng := rand.New(rand.NewPCG(1, 2))
	msgs, err := forgedMessages(n, rng, fw.prefix+"."+fw.a.node.JobID(), fw.prefix+"."+fw.w.node.JobID(), "parked",
		floodForged, keys, 5)
	if err != nil {
		return nil, err
	}
	if spec.key && len(captured) > 0 {
		for i := range floodRing - n {
			msgs = append(msgs, captured[i%len(captured)])
		}
		rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	}
	return msgs, nil
}

// phaseResult is what one phase measured.
type phaseResult struct {
	latency       Latency
	goroutines    int
	heapMiB       float64
	scripts       int
	publishedPerS float64
	took          time.Duration
	received      uint64 // messages that reached A's connection
	holderCalls   int64  // Redis round trips of A and B
}

// phase times spec.handoffs handoffs of the hot profile while W waits for
// the parked one, with the flood flood starts (nil: quiet) running
// throughout.
func (fw *floodWorld) phase(ctx context.Context, spec floodSpec, flood func() *floodPublisher) (pr phaseResult, err error) {
	inBefore := fw.a.nc.Stats().InMsgs
	callsBefore := fw.a.calls.RoundTrips() + fw.b.calls.RoundTrips()
	smp := startSampler()
	var pub *floodPublisher
	if flood != nil {
		pub = flood()
	}
	start := time.Now()
	waited := make(chan error, 1)
	go func() { waited <- fw.waitParked(ctx) }()
	samples := make([]float64, 0, spec.handoffs)
	servers := [2]*handoffServer{fw.a, fw.b}
	for i := 1; i <= spec.handoffs && err == nil && time.Since(start) < floodPhaseMax; i++ {
		joiner := servers[i%2]
		began := time.Now()
		var q *datadriver.Profile[profileData]
		if q, err = joiner.drv.Join(ctx, "hot"); err == nil {
			samples = append(samples, msOf(time.Since(began)))
			fw.hot = q
			err = q.Update(func(d *profileData) { d.Coins++ })
		}
	}
	if werr := <-waited; err == nil {
		err = werr
	}
	pr.took = time.Since(start)
	if pub != nil {
		pr.publishedPerS = pub.stop()
	}
	pr.goroutines, pr.heapMiB = smp.stop()
	pr.received = fw.a.nc.Stats().InMsgs - inBefore
	pr.holderCalls = fw.a.calls.RoundTrips() + fw.b.calls.RoundTrips() - callsBefore
	pr.latency = summarize(samples)
	pr.scripts = int(fw.scripts.last.Load())
	return pr, err
}

// waitParked makes W join the parked profile, which D keeps: the join waits
// its LockWait and fails with ErrWaitTimeout. The scripts it ran are in
// fw.scripts.last.
func (fw *floodWorld) waitParked(ctx context.Context) error {
	before := fw.scripts.n.Load()
	_, err := fw.w.drv.Join(context.WithValue(ctx, inWait{}, true), "parked")
	fw.scripts.last.Store(fw.scripts.n.Load() - before)
	if !errors.Is(err, datadriver.ErrWaitTimeout) {
		return fmt.Errorf("the waiting join of a profile D keeps: %v, want ErrWaitTimeout", err)
	}
	return nil
}

// inWait marks the context of W's waiting join, so that scriptCounter
// counts its scripts and not W's beats.
type inWait struct{}

// scriptCounter counts the scripts (EVALSHA, EVAL) sent under a context
// marked inWait.
type scriptCounter struct {
	n, last atomic.Int64
}

var _ redis.Hook = (*scriptCounter)(nil)

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(inWait{}) != nil && strings.HasPrefix(cmd.Name(), "eval") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// writeText writes the flood's figures.
func (f Flood) writeText(ew *errWriter) {
	ew.printf("\nFlood (a peer on the NATS server sends %d forged messages/s; handoffs A ⇄ B, a join waiting on a live holder that never answers):\n",
		f.TargetPerS)
	for _, fr := range []FloodRun{f.WithoutKey, f.WithKey} {
		key := "without RequestKey"
		if fr.RequestKey {
			key = "with RequestKey (half the flood replays captured signed messages)"
		}
		ew.printf("  %s: published %.0f msg/s for %.1f s, %.0f/s reached A\n", key, fr.PublishedPerS, fr.FloodS, fr.ReceivedPerS)
		ew.printf("    handoff quiet    p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f\n", fr.Quiet.P50MS, fr.Quiet.P90MS, fr.Quiet.P99MS, fr.Quiet.MaxMS)
		ew.printf("    handoff flooded  p50 %7.3f ms  p90 %7.3f  p99 %7.3f  max %7.3f\n", fr.Flooded.P50MS, fr.Flooded.P90MS,
			fr.Flooded.P99MS, fr.Flooded.MaxMS)
		ew.printf("    goroutines %d → %d, live heap %.1f → %.1f MiB; waiting join %d → %d scripts; A and B %.0f Redis round trips/s;\n",
			fr.GoroutinesQuiet, fr.GoroutinesFlooded, fr.HeapQuietMiB, fr.HeapFloodedMiB, fr.ScriptsWaitQuiet, fr.ScriptsWaitFlooded,
			fr.HolderRedisPerS)
		ew.printf("    %d replies to the forged requester; %d bystander sessions ended\n", fr.RepliesToForged, fr.SessionsEnded)
	}
}

// flood checks Result.Flood: both runs, their rates and handoffs.
func (c *checker) flood() {
	for _, run := range []string{"without_key", "with_key"} {
		at := func(f ...string) []string { return append([]string{"flood", run}, f...) }
		c.pos(at("published_per_s")...)
		c.pos(at("scripts_wait_quiet")...)
		c.latency(at("quiet")...)
		c.latency(at("flooded")...)
	}
}
