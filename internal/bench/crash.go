package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
)

// Crash is the crash takeover: a server holding profiles stops without
// releasing them (its Redis client and NATS connection are closed: it beats
// no more and answers nothing), and another server, which beats and reads
// presence with the same shortened timings, joins each of them at once. The
// time runs from the crash to the joiner holding the profile.
//
// Both servers run every presence and handoff timing scaled down by
// CrashTTL ÷ presencecore.DefaultTTL, as "playerdata demo --speed" does: beat,
// presence TTL, request repeat and parking (a park of the default 0.5 s
// would otherwise outlast a 400 ms TTL and set the takeover time itself).
//
// The crash falls at a random point of the holder's beat period. The
// holder's presence expires TTL after its last beat, and the joiner takes
// the lock after two stopped reads a beat apart, so the ideal takeover
// lies between TTL and TTL + beat after the crash: Floor is TTL + beat.
type Crash struct {
	BeatMS  float64 `json:"beat_ms"`
	TTLMS   float64 `json:"ttl_ms"`
	FloorMS float64 `json:"floor_ms"`
	// Scale is CrashTTL ÷ presencecore.DefaultTTL: the factor every timing was
	// multiplied by; MeanAtDefaultMS is MeanMS ÷ Scale, the mean takeover
	// at the default timings (beat 3 s, TTL 10 s).
	Scale           float64 `json:"scale"`
	MeanAtDefaultMS float64 `json:"mean_at_default_ms"`
	Trials          int     `json:"trials"`
	Profiles        int     `json:"profiles"` // taken over in all
	MeanMS          float64 `json:"mean_ms"`
	MinMS           float64 `json:"min_ms"`
	MaxMS           float64 `json:"max_ms"`
}

// crashLockWait bounds the joiner's wait: well past TTL + beat.
const crashLockWait = 10 * time.Second

// runCrash runs CrashTrials crashes and fills Result.Crash.
func (r *runner) runCrash(ctx context.Context) error {
	ns := r.ns("crash")
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = r.deleteNamespace(cctx, ns)
	}()
	beat, ttl := r.cfg.CrashBeat, r.cfg.CrashTTL
	scale := func(d time.Duration) time.Duration { return d * ttl / presencecore.DefaultTTL }
	timings := func(c *datadriver.NodeConfig) {
		c.Beat, c.PresenceTTL = beat, ttl
		c.RequestRepeat = scale(handoffcore.DefaultRequestRepeat)
		c.ParkMin, c.ParkMax = scale(handoffcore.DefaultParkMin), scale(handoffcore.DefaultParkMax)
	}
	joiner, err := r.startServer(ctx, ns, "bench-joiner-"+randomID(), timings,
		func(c *datadriver.Config[profileData]) { c.LockWait = crashLockWait })
	if err != nil {
		return err
	}
	defer joiner.close(ctx)
	rng := rand.New(rand.NewPCG(3, 4))
	var took []float64
	for t := range r.cfg.CrashTrials {
		d, err := r.crashTrial(ctx, ns, t, joiner, timings, rng)
		if err != nil {
			return fmt.Errorf("trial %d: %w", t+1, err)
		}
		took = append(took, d...)
	}
	if len(took) == 0 {
		return fmt.Errorf("no profile was taken over")
	}
	lowest := slices.Min(took)
	l := summarize(took)
	k := float64(ttl) / float64(presencecore.DefaultTTL)
	r.res.Crash = Crash{BeatMS: ms(beat), TTLMS: ms(ttl), FloorMS: ms(beat + ttl), Scale: round3(k),
		MeanAtDefaultMS: round1(l.MeanMS / k), Trials: r.cfg.CrashTrials,
		Profiles: l.N, MeanMS: round1(l.MeanMS), MinMS: round1(lowest), MaxMS: round1(l.MaxMS)}
	c := r.res.Crash
	r.progress("  %d crashes, %d profiles: taken over after %.0f ms on average (min %.0f, max %.0f); floor TTL + beat = %.0f ms; at the default timings %.1f s",
		c.Trials, c.Profiles, c.MeanMS, c.MinMS, c.MaxMS, c.FloorMS, c.MeanAtDefaultMS/1000)
	return nil
}

// crashTrial starts a holder, has it join CrashProfiles keys and save them,
// crashes it at a random point of its beat period, and times the joiner's
// takeover of each key (ms since the crash).
func (r *runner) crashTrial(ctx context.Context, ns string, t int, joiner *handoffServer,
	timings func(*datadriver.NodeConfig), rng *rand.Rand) ([]float64, error) {
	holder, err := r.startServer(ctx, ns, "bench-holder-"+strconv.Itoa(t)+"-"+randomID(), timings, nil)
	if err != nil {
		return nil, err
	}
	defer holder.close(ctx)
	keys := make([]string, r.cfg.CrashProfiles)
	for i := range keys {
		keys[i] = "crash-" + strconv.Itoa(t) + "-" + strconv.Itoa(i)
		p, err := holder.drv.Join(ctx, keys[i])
		if err != nil {
			return nil, err
		}
		if err := p.Update(func(d *profileData) { d.Coins = 100 }); err != nil {
			return nil, err
		}
		if err := p.Save(ctx); err != nil {
			return nil, err
		}
	}
	// Let the holder beat a few times, then crash it at a random phase.
	phase := 2*r.cfg.CrashBeat + time.Duration(rng.Int64N(int64(r.cfg.CrashBeat)))
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(phase):
	}
	crashAt := time.Now()
	holder.crash()

	took := make([]float64, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			p, err := joiner.drv.Join(ctx, key)
			took[i] = msOf(time.Since(crashAt))
			if err != nil {
				errs[i] = err
				return
			}
			var coins int64
			p.View(func(d *profileData) { coins = d.Coins })
			if coins != 100 {
				errs[i] = fmt.Errorf("%s: took over with coins %d, the holder saved 100", key, coins)
			}
			if err := p.Release(ctx); err != nil && errs[i] == nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return took, nil
}
