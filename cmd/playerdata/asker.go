package main

// Asking the servers over NATS whether they hold a lock's token: how
// repair frees a lock that names no holder while servers live (every live
// server answers that it holds no lock under that token, or releases it
// first). The CLI runs a Handoff of its own for it, on its own subject.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/lockrule"
	"github.com/ckernel/playerdata/messaging"
)

// asker is the CLI's Handoff on NATS, for AskAll.
type asker struct {
	nc *nats.Conn
	h  *handoffcore.Handoff
}

// openAsker connects to NATS as "playerdata-<command>-<8 hex>", subscribes
// to that server's subject under the servers' prefix, and signs with their
// request key when --request-key-file gives it. The caller closes it.
func openAsker(ctx context.Context, r *reader, af *adminFlags, command, url string, stderr io.Writer) (*asker, error) {
	var rnd [4]byte
	if _, err := crand.Read(rnd[:]); err != nil {
		return nil, err
	}
	job := "playerdata-" + command + "-" + hex.EncodeToString(rnd[:])
	key, err := af.requestKey()
	if err != nil {
		return nil, err
	}
	nc, err := connectNATS(url, job)
	if err != nil {
		return nil, err
	}
	prefix := af.subjectPrefix
	if r.ns != "" {
		prefix = r.ns + "." + prefix
	}
	bus, err := messaging.NewNATSBus(nc, messaging.NATSConfig{Prefix: prefix, Key: key})
	if err == nil {
		var h *handoffcore.Handoff
		h, err = handoffcore.New(handoffcore.Config{JobID: job, Bus: bus, Presence: r.pres,
			Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err == nil {
			h.Start()
			fctx, cancel := context.WithTimeout(ctx, dialTimeout) // the subscription is in place before a request
			err = nc.FlushWithContext(fctx)
			cancel()
			if err == nil {
				return &asker{nc: nc, h: h}, nil
			}
			_ = h.Close(ctx)
		}
	}
	nc.Close()
	return nil, err
}

// ask is a lockrule.AskFunc for driver/key, each round bounded by wait.
func (a *asker) ask(driver, key string, wait time.Duration) lockrule.AskFunc {
	return func(ctx context.Context, token string, jobs []string) []string {
		actx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return a.h.AskAll(actx, driver, key, token, jobs)
	}
}

// close unsubscribes and closes the connection.
func (a *asker) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = a.h.Close(ctx)
	a.nc.Close()
}
