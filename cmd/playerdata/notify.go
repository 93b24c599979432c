package main

// Telling a server over NATS that a profile's inbox has messages to pull,
// as a server's Driver.Send does, for a command that changed the inbox
// without sending (replay).

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"

	"github.com/ckernel/playerdata/messaging"
)

// adminJob is the JobID of a command's own Node or connection:
// "playerdata-<command>-<8 hex>".
func adminJob(command string) (string, error) {
	var rnd [4]byte
	if _, err := crand.Read(rnd[:]); err != nil {
		return "", err
	}
	return "playerdata-" + command + "-" + hex.EncodeToString(rnd[:]), nil
}

// notifyHolder tells holder, the server holding driver/key in namespace
// ns, that the profile's inbox has messages to pull: one notification (the
// wire message a Send publishes) on the servers' subject
// ("<ns>.<prefix>.<holder>"), signed when --request-key-file is given,
// flushed to the NATS server before it returns. Fire and forget: NATS
// confirms no delivery.
func notifyHolder(ctx context.Context, af *adminFlags, command, ns, driver, key, holder string, stderr io.Writer) error {
	reqKey, err := af.requestKey()
	if err != nil {
		return err
	}
	job, err := adminJob(command)
	if err != nil {
		return err
	}
	nc, err := connectNATS(af.natsServer(), job)
	if err != nil {
		return err
	}
	defer nc.Close()
	prefix := af.subjectPrefix
	if ns != "" {
		prefix = ns + "." + prefix // as a Node of the namespace subscribes
	}
	bus, err := messaging.NewNATSBus(nc, messaging.NATSConfig{Prefix: prefix, Key: reqKey,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	m := messaging.Message{Type: messaging.TypeNotify, Driver: driver, Key: key, Sender: job}
	if err := bus.Publish(ctx, holder, m); err != nil {
		return fmt.Errorf("tell %s over NATS: %w", holder, err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("tell %s over NATS: flush: %w", holder, err)
	}
	return nil
}
