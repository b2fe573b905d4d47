package config

import (
	"flag"
	"fmt"
	"time"
)

// Realtime holds the settings of the realtime channel (SPEC §8).
type Realtime struct {
	// MaxDeltaBytes: a larger delta is sent as a delta-too-large wake-up.
	MaxDeltaBytes int
	// Heartbeat is the heartbeat interval (0: none).
	Heartbeat time.Duration
	// IdleTimeout closes a socket that answers no ping for this long; the
	// pings go out with the heartbeats (0: no pings).
	IdleTimeout time.Duration
	// WriteTimeout bounds one socket write; a slower client is dropped.
	WriteTimeout time.Duration
	// SendQueueBytes bounds a socket's queued outbound bytes.
	SendQueueBytes int
	// MaxSockets and MaxSocketsPerActor bound the sockets of this node and
	// of one actor on it, realtime and operation watch sockets together
	// (0: unbounded); past them the upgrade is refused with
	// sync.websocket_connection_limit.
	MaxSockets         int
	MaxSocketsPerActor int
	// MaxPresenceBytes caps a presence document (§8.6.2); a larger publish
	// is refused with presence.too_large.
	MaxPresenceBytes int
	// PresenceLease: a presence document heard from another node is
	// dropped once that node has been silent this long (it crashed or lost
	// the fanout); nodes renew theirs every third of it.
	PresenceLease time.Duration
}

// DefaultRealtime returns the reference settings.
func DefaultRealtime() Realtime {
	return Realtime{
		MaxDeltaBytes:    1 << 20,
		Heartbeat:        30 * time.Second,
		IdleTimeout:      60 * time.Second,
		WriteTimeout:     10 * time.Second,
		SendQueueBytes:   4 << 20,
		MaxPresenceBytes: 16 << 10,
		PresenceLease:    30 * time.Second,
	}
}

func (r *Realtime) flags(fs *flag.FlagSet) {
	fs.IntVar(&r.MaxDeltaBytes, "realtime-max-delta-bytes", r.MaxDeltaBytes, "largest realtime delta; a larger one is sent as a delta-too-large wake-up")
	fs.DurationVar(&r.Heartbeat, "realtime-heartbeat", r.Heartbeat, "realtime heartbeat interval (0: none)")
	fs.DurationVar(&r.IdleTimeout, "realtime-idle-timeout", r.IdleTimeout, "close a realtime socket that answers no ping for this long (pings go with the heartbeats; 0: none)")
	fs.DurationVar(&r.WriteTimeout, "realtime-write-timeout", r.WriteTimeout, "drop a realtime socket when one write takes longer")
	fs.IntVar(&r.SendQueueBytes, "realtime-send-queue-bytes", r.SendQueueBytes, "outbound bytes queued per realtime socket before deltas turn into wake-ups and rounds wait")
	fs.IntVar(&r.MaxSockets, "realtime-max-sockets", r.MaxSockets, "most sockets on this node, realtime and operation watch sockets together; more are refused with sync.websocket_connection_limit (0: unbounded)")
	fs.IntVar(&r.MaxPresenceBytes, "realtime-max-presence-bytes", r.MaxPresenceBytes, "largest presence document (serialized JSON); a larger publish is refused with presence.too_large")
	fs.DurationVar(&r.PresenceLease, "realtime-presence-lease", r.PresenceLease, "drop presence heard from another node once that node has been silent this long (nodes renew every third of it)")
	fs.IntVar(&r.MaxSocketsPerActor, "realtime-max-sockets-per-actor", r.MaxSocketsPerActor, "most sockets of one actor on this node, realtime and operation watch sockets together; more are refused with sync.websocket_connection_limit (0: unbounded)")
}

func (r Realtime) validate() []error {
	var errs []error
	if r.MaxDeltaBytes < 1 || r.SendQueueBytes < 1 {
		errs = append(errs, fmt.Errorf("--realtime-max-delta-bytes and --realtime-send-queue-bytes must be positive"))
	}
	if r.Heartbeat < 0 || r.IdleTimeout < 0 || r.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--realtime-heartbeat and --realtime-idle-timeout must not be negative, --realtime-write-timeout must be positive"))
	}
	if r.MaxPresenceBytes < 1 {
		errs = append(errs, fmt.Errorf("--realtime-max-presence-bytes must be positive"))
	}
	if r.PresenceLease < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("--realtime-presence-lease must be at least 3ms"))
	}
	if r.MaxSockets < 0 || r.MaxSocketsPerActor < 0 {
		errs = append(errs, fmt.Errorf("--realtime-max-sockets and --realtime-max-sockets-per-actor must not be negative"))
	}
	return errs
}
