package messaging

import "github.com/nats-io/nats.go"

// watchConn puts the bus's connection event handlers in front of the ones
// the application set on nc, each calling the application's after its own.
func (b *NATSBus) watchConn(nc *nats.Conn) {
	appDisconnect := nc.DisconnectErrHandler()
	// The deprecated form has no getter. nats.go calls it only while no
	// DisconnectedErrCB is set, which is about to change, so the chain
	// calls it in that case.
	appDisconnectOld := nc.Opts.DisconnectedCB
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		b.onDisconnect(c, err)
		switch {
		case appDisconnect != nil:
			appDisconnect(c, err)
		case appDisconnectOld != nil:
			appDisconnectOld(c)
		}
	})

	appReconnect := nc.ReconnectHandler()
	nc.SetReconnectHandler(func(c *nats.Conn) {
		b.onReconnect(c)
		if appReconnect != nil {
			appReconnect(c)
		}
	})

	appError := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		b.onAsyncError(sub, err)
		if appError != nil {
			appError(c, sub, err)
		}
	})

	appClosed := nc.ClosedHandler()
	nc.SetClosedHandler(func(c *nats.Conn) {
		b.onClosed(c)
		if appClosed != nil {
			appClosed(c)
		}
	})
}

// onDisconnect counts and logs a lost connection. nats.go also reports a
// disconnect just before a close (both run on its callback goroutine, in
// that order, after the status has become CLOSED); that one is left to
// onClosed.
func (b *NATSBus) onDisconnect(c *nats.Conn, err error) {
	if c.IsClosed() {
		return
	}
	b.disconnects.Add(1)
	b.opts.logger.Warn("messaging: NATS disconnected; until it reconnects, release requests to this server go unanswered and its players cannot be handed over",
		"err", err, "subscriptions", b.liveSubs.Load())
}

// onReconnect counts and logs a connection that is back; nats.go has
// resubscribed by then.
func (b *NATSBus) onReconnect(c *nats.Conn) {
	b.reconnects.Add(1)
	b.opts.logger.Info("messaging: NATS reconnected; handoff requests flow again", "url", c.ConnectedUrlRedacted())
}

// onClosed counts and logs the end of the connection: an error while a
// subscription is live (this server will answer no release request again)
// or when the connection ended on an error, else the clean shutdown.
func (b *NATSBus) onClosed(c *nats.Conn) {
	b.closes.Add(1)
	subs, err := b.liveSubs.Load(), c.LastError()
	if subs > 0 || err != nil {
		b.opts.logger.Error("messaging: NATS connection closed; this server will answer no release request and send none again",
			"err", err, "subscriptions", subs)
		return
	}
	b.opts.logger.Info("messaging: NATS connection closed")
}
