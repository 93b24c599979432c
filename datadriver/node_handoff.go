package datadriver

import (
	"fmt"

	"github.com/ckernel/playerdata/internal/jobid"

	"github.com/ckernel/playerdata/internal/handoffcore"
	"github.com/ckernel/playerdata/internal/presencecore"
	"github.com/ckernel/playerdata/internal/telemetry"
	"github.com/ckernel/playerdata/messaging"
)

// startHandoff builds the presence hash client, the bus and the handoff.
// With handoff off there is no bus, and the handoff still reads presence, to
// keep a live holder's lock from being taken by age.
func (n *Node) startHandoff() error {
	cfg := n.cfg
	active := n.handoffOn
	if active {
		if err := jobid.Check(n.jobID); err != nil {
			return fmt.Errorf("%w: JobID: %w", ErrInvalidConfig, err)
		}
	}
	name := cfg.PresenceKey
	if name == "" {
		name = presencecore.DefaultKeyName
	}
	key := name
	if n.ns != "" {
		key = n.ns + ":" + name
	}
	prdb, own := presenceClient(cfg)
	n.prdb = prdb
	if own {
		n.closePresenceRedis = prdb.Close
	} else if cfg.PresenceRedis == nil {
		n.log.Warn("presence shares the Redis client (not a *redis.Client or ClusterClient): a saturated pool " +
			"can delay beats; give NodeConfig.PresenceRedis")
	}
	pres, err := presencecore.New(prdb, presencecore.Config{
		Key: key, JobID: n.jobID, Beat: cfg.Beat, TTL: cfg.PresenceTTL, FenceMargin: cfg.FenceMargin,
		Shards: cfg.PresenceShards, Clock: n.clock, Logger: n.log, OnLapse: n.onLapse, Sessions: n.beatSessions,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	n.presence = pres
	bus := cfg.Bus
	if bus == nil && cfg.NATS != nil && active {
		prefix := cfg.SubjectPrefix
		if prefix == "" {
			prefix = messaging.DefaultPrefix
		}
		if n.ns != "" {
			prefix = n.ns + "." + prefix
		}
		bc := messaging.NATSConfig{Prefix: prefix, Clock: n.clock, Logger: n.log}
		if len(cfg.RequestKey) == 0 {
			warnUnauthenticated(n.log, prefix)
		} else {
			bc.Key, bc.AcceptUnauthenticated, bc.AcceptedKeys = cfg.RequestKey, cfg.RequestKeyOptional, cfg.RequestKeysAccepted
		}
		nb, err := messaging.NewNATSBus(cfg.NATS, bc)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		n.bus, n.prefix, bus = nb, prefix, nb
	} else if len(cfg.RequestKey) > 0 {
		return fmt.Errorf("%w: RequestKey needs NATS (a Bus given instead carries no MAC), and handoff on", ErrInvalidConfig)
	}
	if !active {
		bus = nil
	}
	n.tel = telemetry.New(telemetry.Config{MeterProvider: cfg.MeterProvider, TracerProvider: cfg.TracerProvider,
		JobID: n.jobID, NATSPrefix: n.prefix})
	n.handoff, err = handoffcore.New(handoffcore.Config{
		JobID: n.jobID, Bus: bus, Presence: pres,
		Beat: pres.Config().Beat, RequestRepeat: cfg.RequestRepeat, ParkMin: cfg.ParkMin, ParkMax: cfg.ParkMax,
		Clock: n.clock, Logger: n.log, Trace: handoffTrace(n.tel),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// startTelemetry registers the bus's counters (drops, connection events)
// with the Node's telemetry, read at each scrape.
func (n *Node) startTelemetry() {
	n.unregBus = n.tel.RegisterBus(func() telemetry.BusStats {
		var s telemetry.BusStats
		hs := n.handoff.Stats()
		s.Dropped[telemetry.DropUnknownDriver] = hs.DroppedUnknownDriver
		s.Dropped[telemetry.DropUnwaited] = hs.DroppedUnwaited
		if n.bus != nil {
			b := n.bus.Stats()
			s.Dropped[telemetry.DropMalformed] = b.DroppedMalformed
			s.Dropped[telemetry.DropTooLarge] = b.DroppedTooLarge
			s.Dropped[telemetry.DropUnknownType] = b.DroppedUnknownType
			s.Dropped[telemetry.DropUnauthenticated] = b.DroppedUnauthenticated
			s.Dropped[telemetry.DropReplayed] = b.DroppedReplayed
			s.Dropped[telemetry.DropBacklog] = b.DroppedBacklog
			s.Events[telemetry.BusDisconnect] = b.Disconnects
			s.Events[telemetry.BusReconnect] = b.Reconnects
			s.Events[telemetry.BusClose] = b.Closes
		}
		return s
	})
}
