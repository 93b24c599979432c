package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// PingerEnv, set to "1" in a process's environment, makes playerdata-bench
// that process the other client of the big-profile history (RunPinger),
// with the Redis URL in PingerRedisEnv and the period in PingerPeriodEnv.
const (
	PingerEnv       = "PLAYERDATA_BENCH_PINGER"
	PingerRedisEnv  = "PLAYERDATA_BENCH_PINGER_REDIS"
	PingerPeriodEnv = "PLAYERDATA_BENCH_PINGER_PERIOD"
)

// RunPinger PINGs Redis (opts) every period until ctx ends or w fails,
// writing one line per answer: when it was sent (Unix ns) and how long it
// took (ns). A process of its own, so that what it measures is Redis's
// answer time and not a busy process's pauses.
func RunPinger(ctx context.Context, opts *redis.Options, period time.Duration, w io.Writer) error {
	rdb := redis.NewClient(opts)
	defer func() { _ = rdb.Close() }()
	bw := bufio.NewWriter(w)
	for ctx.Err() == nil {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err == nil {
			if _, err := fmt.Fprintf(bw, "%d %d\n", start.UnixNano(), time.Since(start)); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		_ = sleep(ctx, period)
	}
	return nil
}

// pinger is the other client of the big-profile history: the PINGs'
// starts and latencies, from a process of its own (Env.Pinger) or a
// goroutine.
type pinger struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	at     []time.Time
	took   []time.Duration
}

// startPinger starts the other client: Env.Pinger's process, else a
// goroutine with a Redis client of its own. stop ends it.
func (r *runner) startPinger(ctx context.Context) *pinger {
	ctx, cancel := context.WithCancel(ctx)
	p := &pinger{cancel: cancel}
	if r.env.Pinger != nil {
		if cmd := r.env.Pinger(ctx, bigPingEvery); cmd != nil {
			if out, err := cmd.StdoutPipe(); err == nil && cmd.Start() == nil {
				// Ahead of this busy process for the CPU when allowed (root):
				// what it measures is Redis, as a client on another machine
				// would, not a CPU shared with the bench.
				_ = raisePriority(cmd.Process.Pid)
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					p.read(out)
					_ = cmd.Wait()
				}()
				return p
			}
		}
	}
	rdb := r.client(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { _ = rdb.Close() }()
		for ctx.Err() == nil {
			start := time.Now()
			if err := rdb.Ping(ctx).Err(); err == nil {
				p.add(start, time.Since(start))
			}
			_ = sleep(ctx, bigPingEvery)
		}
	}()
	return p
}

// read takes the pinger process's lines (RunPinger's) until it ends.
func (p *pinger) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		at, took, ok := strings.Cut(sc.Text(), " ")
		ns, err1 := strconv.ParseInt(at, 10, 64)
		d, err2 := strconv.ParseInt(took, 10, 64)
		if ok && err1 == nil && err2 == nil {
			p.add(time.Unix(0, ns), time.Duration(d))
		}
	}
}

func (p *pinger) add(at time.Time, took time.Duration) {
	p.mu.Lock()
	p.at, p.took = append(p.at, at), append(p.took, took)
	p.mu.Unlock()
}

// worst is the slowest PING that started in [from, to], in ms, and how
// many did.
func (p *pinger) worst(from, to time.Time) (float64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var w time.Duration
	n := 0
	for i, at := range p.at {
		if !at.Before(from) && !at.After(to) {
			w, n = max(w, p.took[i]), n+1
		}
	}
	return round3(ms(w)), n
}

// over is how many PINGs that started in [from, to] took over d.
func (p *pinger) over(from, to time.Time, d time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i, at := range p.at {
		if !at.Before(from) && !at.After(to) && p.took[i] > d {
			n++
		}
	}
	return n
}

// stop ends the PINGs (the process is killed with its context).
func (p *pinger) stop() {
	p.cancel()
	p.wg.Wait()
}
