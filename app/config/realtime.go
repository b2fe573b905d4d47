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
	// SendQueueBytes bounds a socket's queued outbound bytes: deltas past
	// it become wake-ups, round chunks wait, and control messages past a
	// quarter more close the socket (the client is not reading).
	SendQueueBytes int
	// SendBudgetBytes bounds the bytes queued on all the node's sockets
	// together (deltas past it become wake-ups, round chunks wait).
	SendBudgetBytes int64
	// PresenceRate bounds one socket's presence publishes per second, in
	// bursts of PresenceBurst (0: unbounded); faster publishes are held,
	// the latest per key winning, and applied as the rate allows.
	PresenceRate  float64
	PresenceBurst int
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
		SendBudgetBytes:  128 << 20,
		PresenceRate:     10,
		PresenceBurst:    20,
		MaxPresenceBytes: 16 << 10,
		PresenceLease:    30 * time.Second,
	}
}

func (r *Realtime) flags(fs *flag.FlagSet) {
	fs.IntVar(&r.MaxDeltaBytes, "realtime-max-delta-bytes", r.MaxDeltaBytes, "largest realtime delta; a larger one is sent as a delta-too-large wake-up")
	fs.DurationVar(&r.Heartbeat, "realtime-heartbeat", r.Heartbeat, "realtime heartbeat interval (0: none)")
	fs.DurationVar(&r.IdleTimeout, "realtime-idle-timeout", r.IdleTimeout, "close a realtime socket that answers no ping for this long (pings go with the heartbeats; 0: none)")
	fs.DurationVar(&r.WriteTimeout, "realtime-write-timeout", r.WriteTimeout, "drop a realtime socket when one write takes longer")
	fs.IntVar(&r.SendQueueBytes, "realtime-send-queue-bytes", r.SendQueueBytes, "outbound bytes queued per realtime socket before deltas turn into wake-ups and rounds wait; control messages a quarter past it close the socket (1008)")
	fs.Int64Var(&r.SendBudgetBytes, "realtime-send-budget-bytes", r.SendBudgetBytes, "outbound bytes queued on all realtime sockets of this node together; past it deltas turn into wake-ups and rounds wait")
	fs.Float64Var(&r.PresenceRate, "realtime-presence-rate", r.PresenceRate, "presence publishes per second one socket may make (0: unbounded); faster ones are held, the latest per key winning")
	fs.IntVar(&r.PresenceBurst, "realtime-presence-burst", r.PresenceBurst, "presence publishes one socket may make at once before --realtime-presence-rate applies")
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
	if r.SendBudgetBytes < int64(r.SendQueueBytes) {
		errs = append(errs, fmt.Errorf("--realtime-send-budget-bytes %d: must be at least --realtime-send-queue-bytes (%d)", r.SendBudgetBytes, r.SendQueueBytes))
	}
	if r.PresenceRate < 0 || r.PresenceBurst < 0 || (r.PresenceRate > 0 && r.PresenceBurst < 1) {
		errs = append(errs, fmt.Errorf("--realtime-presence-rate must not be negative, and --realtime-presence-burst must be positive when it is set"))
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

// MaxControlBytes bounds one text message a client sends on the realtime
// socket (acks and presence publishes): room for the largest presence
// document written with escapes, and no more, so that a socket's control
// messages cannot be a way to hold memory.
func (r Realtime) MaxControlBytes() int64 { return 4*int64(r.MaxPresenceBytes) + 64<<10 }
