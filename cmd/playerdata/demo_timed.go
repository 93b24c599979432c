package main

// The two timed cases of the demo: crash (A dies; B proves it stopped and
// takes over) and stalling-holder (A beats presence but its saves stall).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/ckernel/playerdata/datadriver"
	"github.com/ckernel/playerdata/internal/defaults"
	"github.com/ckernel/playerdata/internal/record"
)

// playCrash: A dies holding the lock; B takes over once A's presence has
// expired and two reads a beat apart prove it stopped.
func playCrash(ctx context.Context, c *caseRun) error {
	a, b, err := c.twoServers(ctx, nil)
	if err != nil {
		return err
	}
	// The kill switch: from now on every command of A fails.
	var killed atomic.Bool
	a.hook.set(func(context.Context, redis.Cmder) error {
		if killed.Load() {
			return errKilled
		}
		return nil
	})

	pa, err := c.joinA(ctx, a)
	if err != nil {
		return err
	}
	_ = pa.Update(func(d *player) { d.Coins += 80 })
	if err := pa.Save(ctx); err != nil {
		return fmt.Errorf("server A's save: %w", err)
	}
	landed := snapshot(pa)
	c.tl.add("A", kindAction, fmt.Sprintf("save lands: %s (A's last landed save)", landed))
	_ = pa.Update(func(d *player) { d.Coins += 50 })
	c.tl.add("A", kindNote, fmt.Sprintf("player plays on: %s, never saved: lost with the crash", snapshot(pa)))

	killed.Store(true)
	since := "no beat seen"
	if beat := a.lastBeat(); !beat.IsZero() {
		since = "its last presence beat went out " + human(time.Since(beat)) + " before"
	}
	c.tl.add("A", kindBad, "A is killed: every Redis command of A fails from now on, its NATS connection closes and its "+
		"Node stops without releasing ("+since+")")
	c.tl.mute("A") // a dead server does nothing more
	a.nc.Close()
	closeCtx, cancel := context.WithTimeout(ctx, closeTimeout)
	_ = a.node.Close(closeCtx) // every release fails: the lock stays in Redis
	cancel()

	pb, err := c.joinB(ctx, b)
	if pb == nil || err != nil {
		return err
	}
	c.checkSameData(landed, pb)
	return nil
}

// playStallingHolder: A is alive (it beats presence) but its saves stall.
// The player, who joined B, is kicked from A; A's release stalls, so A
// keeps the lock, and B's join fails closed after LockWait. LockTTL keeps
// its default, as every other timing keeps its ratio to the real ones: a
// LockTTL shorter than LockWait would make A fence itself off mid-case (its
// stalled saves cannot refresh the lock), which at real timings it does
// not.
func playStallingHolder(ctx context.Context, c *caseRun) error {
	c.extra = fmt.Sprintf("LockTTL %.0f s (the default): A's stalled saves do not reach it within the case, so A "+
		"does not fence itself off", defaults.LockTTL.Seconds())
	a, b, err := c.twoServers(ctx, func(n *datadriver.NodeConfig, d *datadriver.Config[player]) {
		n.SaveTimeout = 2*c.t.lockWait + time.Second // A's stalled release outlasts B's wait
	})
	if err != nil {
		return err
	}
	pa, err := c.joinA(ctx, a)
	if err != nil {
		return err
	}
	_ = pa.Update(func(d *player) { d.Coins += 20 })
	if err := pa.Save(ctx); err != nil {
		return fmt.Errorf("server A's save: %w", err)
	}
	c.tl.add("A", kindAction, fmt.Sprintf("save lands: %s (A's last landed save)", snapshot(pa)))
	before, err := c.readRecord(ctx)
	if err != nil {
		return err
	}

	unstall := make(chan struct{})
	var unstallOnce sync.Once
	letThrough := func() { unstallOnce.Do(func() { close(unstall) }) }
	defer letThrough() // however the case ends
	a.hook.set(func(ctx context.Context, cmd redis.Cmder) error {
		mode, ok := saveScriptMode(cmd)
		if !ok || (mode != record.ModeSave && mode != record.ModeRelease) {
			return nil
		}
		c.tl.addAt(time.Now(), "A", kindBad, string(mode)+" sent to Redis: it stalls (the demo's hook holds A's saves)", "stall")
		select {
		case <-unstall:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	c.tl.add("A", kindNote, "A's saves start stalling; its presence beats still land")

	if _, err = c.joinB(ctx, b); err != nil {
		return err
	}
	if err := waitKick(ctx, a); err != nil { // the player left A for B
		return err
	}
	after, err := c.readRecord(ctx)
	if err != nil {
		return err
	}
	c.dataOK = c.outcome == outcomeRefused && after.job == "A" && after.token == before.token &&
		bytes.Equal(after.data, before.data)
	var held player
	_ = msgpack.Unmarshal(after.data, &held)
	if c.dataOK {
		age := ""
		var le *datadriver.LockedError
		if errors.As(c.joinErr, &le) {
			age = fmt.Sprintf(", %s old; A reads alive", human(le.Age))
		}
		c.tl.add("·", kindGood, fmt.Sprintf("the record still holds A's lock (token %s…%s) and A's last landed save (%s)",
			prefix8(after.token), age, held))
	} else {
		c.tl.add("·", kindBad, fmt.Sprintf("the record changed: lock of %q, data %s", after.job, held))
	}

	letThrough()
	c.tl.add("·", kindNote, "end of the case: the demo's hook lets A's saves through")
	return waitDone(ctx, pa)
}

// lockRecord is what the stalling case checks of the record.
type lockRecord struct {
	job, token string
	data       []byte
}

// readRecord reads the case's record straight from Redis.
func (c *caseRun) readRecord(ctx context.Context) (lockRecord, error) {
	v, err := c.env.Admin.HMGet(ctx, record.Key(c.ns, demoDriver, c.def.key),
		record.FieldLockJob, record.FieldLockToken, record.FieldData).Result()
	if err != nil {
		return lockRecord{}, fmt.Errorf("read the record: %w", err)
	}
	s := func(x any) string { t, _ := x.(string); return t }
	return lockRecord{job: s(v[0]), token: s(v[1]), data: []byte(s(v[2]))}, nil
}
