package datadriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ckernel/playerdata/internal/rscript"
)

// Write modes of save.lua.
const (
	modeSave    = "save"
	modeRelease = "release"
	modeSettle  = "settle"
)

// writeReq is one call of save.lua.
type writeReq struct {
	mode    string
	token   string
	earlier []string
	hasData bool
	data    []byte
	hasMeta bool
	uids    []byte
	meta    []byte
	trade   string // the trade this write settles
}

// writeRes is save.lua's answer.
type writeRes struct {
	ver    int64
	epoch  int64
	moved  bool      // the lock moved to the request's token (an adoption landed)
	how    string    // saved, released, already-released
	sentAt time.Time // when the call was sent: lock.at is at least this (see touchLocked)
}

// write runs save.lua for key: one round trip, bounded by the Node's
// SaveTimeout. A LOST answer is an error matching ErrLockLost, a TRADE
// answer one matching ErrTradePending.
func (d *Driver[T]) write(ctx context.Context, key string, w writeReq) (writeRes, error) {
	ctx, cancel := d.node.clock.WithTimeout(ctx, d.node.cfg.SaveTimeout)
	defer cancel()
	c := d.writeCall(key, w)
	sentAt := d.node.clock.Now()
	v, err := c.Script.Run(ctx, d.node.rdb, c.Keys, c.Args...).Result()
	res, err := writeResult(key, w.mode, v, err)
	res.sentAt = sentAt
	return res, err
}

// writeCall is save.lua's call for w, to run alone or in a pipeline.
func (d *Driver[T]) writeCall(key string, w writeReq) rscript.Call {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return rscript.Call{Script: d.node.scripts.save, Keys: []string{d.recordKey(key)}, Args: []any{
		w.mode, w.token, strings.Join(w.earlier, " "), d.node.jobID, flag(d.presenceFlag()),
		flag(w.hasData), w.data, flag(w.hasMeta), w.uids, w.meta,
		d.cfg.History, w.trade,
	}}
}

// writeResult reads save.lua's answer.
func writeResult(key, mode string, v any, err error) (writeRes, error) {
	if err != nil {
		return writeRes{}, fmt.Errorf("%s %q: %w", mode, key, err)
	}
	arr, tag, err := answer(v)
	if err != nil {
		return writeRes{}, fmt.Errorf("%s %q: %w", mode, key, err)
	}
	switch tag {
	case "OK":
		return writeRes{
			ver:   num(elem(arr, 1)),
			epoch: num(elem(arr, 2)),
			moved: str(elem(arr, 3)) == "1",
			how:   str(elem(arr, 4)),
		}, nil
	case "LOST":
		holder := str(elem(arr, 1))
		if holder == "" {
			holder = "nobody"
		}
		return writeRes{}, fmt.Errorf("%s %q: %w (the lock is held by %s)", mode, key, ErrLockLost, holder)
	case "TRADE":
		return writeRes{}, fmt.Errorf("%s %q: %w (%s)", mode, key, ErrTradePending, str(elem(arr, 1)))
	}
	return writeRes{}, fmt.Errorf("%s %q: unexpected answer %q", mode, key, tag)
}

// Save writes the profile to Redis now, fenced by its lock, and refreshes
// the lock's age. It returns an error matching ErrLockLost when another
// server holds the lock or this server fenced itself off (ErrFenced; the
// profile then ends: Done closes), ErrTooLarge
// when the data exceeds MaxDataBytes (nothing written), ErrReleased after a
// release, or the backend's error (the profile stays live; autosave
// retries). ctx bounds the wait for a running save and the save itself.
func (p *Profile[T]) Save(ctx context.Context) error {
	if err := p.lockSave(ctx); err != nil {
		return err
	}
	defer p.unlockSave()
	return p.saveLocked(ctx, modeSave)
}

// Release ends the session: it runs the leave cleanups, then the release
// save, which writes the data and clears the lock in one round trip. On
// success the profile ends (Done closes, Err is ErrReleased). When the save
// fails the profile is retained, still holding the lock: a rejoin on this
// Node adopts it with everything earned, a request from another server
// retries the release at once, and the autosave loop retries it too.
// Release is idempotent: after a successful release it returns nil.
func (p *Profile[T]) Release(ctx context.Context) error {
	d := p.d
	d.mu.Lock()
	switch p.state {
	case stateClosed:
		err := p.err
		d.mu.Unlock()
		if errors.Is(err, ErrReleased) {
			return nil
		}
		return err
	case stateActive:
		p.state = stateLeaving
		d.notify(p.key)
	}
	d.mu.Unlock()
	p.runCleanups()
	return p.release(ctx)
}

// release runs the release save and settles the profile's state.
func (p *Profile[T]) release(ctx context.Context) error {
	d := p.d
	if err := p.lockSave(ctx); err != nil {
		d.retain(p, err)
		return err
	}
	err := p.saveLocked(ctx, modeRelease)
	p.unlockSave()
	if err == nil {
		p.finish(ErrReleased)
		d.log.Debug("profile released", "key", p.key)
		return nil
	}
	if perr := p.Err(); perr != nil { // ended meanwhile: released before, or lost
		if errors.Is(perr, ErrReleased) {
			return nil
		}
		return err
	}
	d.retain(p, err)
	return err
}

// retain marks a profile whose release failed as retained.
func (d *Driver[T]) retain(p *Profile[T], err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.state == stateLeaving {
		p.state = stateRetained
		d.notify(p.key)
		d.log.Warn("release failed; profile retained under its lock", "key", p.key, "err", err)
	}
}

// saveLocked runs one save or release; the caller holds the save slot.
func (p *Profile[T]) saveLocked(ctx context.Context, mode string) error {
	d := p.d
	d.mu.Lock()
	if p.state == stateClosed {
		err := p.err
		d.mu.Unlock()
		return err
	}
	if err := p.checkLeaseLocked(); err != nil {
		d.mu.Unlock()
		return err
	}
	p.saving = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		p.saving = false
		d.notify(p.key)
		d.mu.Unlock()
	}()

	trade, err := p.resolvePending(ctx)
	if err != nil {
		return fmt.Errorf("%s %q: %w", mode, p.key, err)
	}
	d.mu.Lock()
	req := writeReq{mode: mode, token: p.token, earlier: p.earlier, trade: trade}
	d.mu.Unlock()

	data, uids, meta, metaGen, err := p.snapshot()
	if err != nil {
		return fmt.Errorf("%s %q: encode: %w", mode, p.key, err)
	}
	if len(data) > d.cfg.MaxDataBytes {
		return fmt.Errorf("%s %q: %w: %d bytes, limit %d", mode, p.key, ErrTooLarge, len(data), d.cfg.MaxDataBytes)
	}
	req.hasData = !bytes.Equal(data, p.lastData)
	if req.hasData {
		req.data = data
	}
	req.hasMeta, req.uids, req.meta = uids != nil, uids, meta

	res, err := d.write(ctx, p.key, req)
	if err != nil {
		if errors.Is(err, ErrLockLost) {
			p.finish(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	p.ver, p.lastData = res.ver, data
	if trade != "" {
		p.clearPending(trade)
	}
	if req.hasMeta {
		p.dataMu.Lock()
		p.metaSaved = metaGen
		p.dataMu.Unlock()
	}
	d.mu.Lock()
	p.landedLocked(res)
	d.mu.Unlock()
	if res.moved {
		d.log.Info("lock re-asserted", "key", p.key, "epoch", res.epoch, "how", res.how)
	}
	return nil
}
