package datadriver

import (
	"context"
	"time"

	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// giveBack releases a lock this Node holds but no live profile uses any
// more (a load that failed after taking it, a session that ended without a
// release), writing no data: the record stays as its last landed save. A
// failed attempt is retried, 1 s doubling to the autosave period, until it
// lands, the lock turns out to be someone else's, or the driver shuts down;
// without this, a live server would keep a lock nobody on it answers for,
// and joiners elsewhere would wait until it aged out. It returns when it is
// done: callers that must not wait run it on a goroutine of their own.
func (d *Driver[T]) giveBack(key, token string, earlier []string) {
	backoff := time.Second
	for !d.giveBackOnce(key, token, earlier) {
		t := d.node.clock.Timer(backoff)
		select {
		case <-d.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, max(d.cfg.Autosave, defaults.Autosave))
	}
}

// giveBackSoon makes one attempt now and, when it fails, goes on trying in
// the background: for a load that fails after taking a lock, so that the
// key is free (or being freed) when the load returns.
func (d *Driver[T]) giveBackSoon(key, token string, earlier []string) {
	if !d.giveBackOnce(key, token, earlier) {
		d.giveBackLater(key, token, earlier)
	}
}

// giveBackLater runs giveBack on a goroutine the driver waits for.
func (d *Driver[T]) giveBackLater(key, token string, earlier []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.goTracked(func() { d.giveBack(key, token, earlier) })
}

// giveBackOnce makes one attempt; it reports whether the lock is no longer
// ours to give back. earlier are tokens the lock may still carry (an
// adoption that never landed).
func (d *Driver[T]) giveBackOnce(key, token string, earlier []string) bool {
	wctx, span := d.tel.StartWrite(context.WithoutCancel(d.ctx), telemetry.WriteGiveBack, key)
	started := d.node.clock.Now()
	_, err := d.write(wctx, key, record.SaveArgs{Mode: record.ModeRelease, Token: token, Earlier: earlier})
	span.End(writeOutcome(err), d.node.clock.Since(started), err)
	switch {
	case err == nil, causeOf(err) != causeNone:
		return true // released; or the lock is another's, the record gone, or broken (which frees the lock)
	case d.ctx.Err() != nil:
		return true
	}
	d.log.Warn("could not give back a lock no session uses; retrying", "key", key, "err", err)
	return false
}
