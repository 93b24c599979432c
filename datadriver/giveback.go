package datadriver

import (
	"context"
	"errors"
	"time"

	"github.com/ckernel/playerdata/internal/record"
	"github.com/ckernel/playerdata/internal/telemetry"
)

// giveBack releases a lock this Node holds but no live profile uses any
// more (a load that failed after taking it, a session this server fenced
// off), writing no data: the record stays as its last landed save. A
// failed attempt is retried in the background, 1 s doubling to the
// autosave period, until it lands, the lock turns out to be someone else's,
// or the driver shuts down; without this, a live server would keep a lock
// nobody on it answers for, and joiners elsewhere would wait until it aged
// out.
func (d *Driver[T]) giveBack(key, token string, earlier []string) {
	if d.giveBackOnce(key, token, earlier) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.goTracked(func() {
		backoff := time.Second
		for {
			t := d.node.clock.Timer(backoff)
			select {
			case <-d.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if d.giveBackOnce(key, token, earlier) {
				return
			}
			backoff = min(backoff*2, max(d.cfg.Autosave, DefaultAutosave))
		}
	})
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
	case err == nil, errors.Is(err, ErrLockLost):
		return true
	case d.ctx.Err() != nil:
		return true
	}
	d.log.Warn("could not give back a lock no session uses; retrying", "key", key, "err", err)
	return false
}
