package config

import (
	"flag"
	"fmt"
	"time"
)

// Reactions are the durable reactions' retention settings (SPEC §6.9).
type Reactions struct {
	// KeepCompleted and KeepDeadLetter are how long completed and
	// dead-lettered reactions are kept after completion or failure.
	KeepCompleted  time.Duration
	KeepDeadLetter time.Duration
	// PruneInterval is how often they are pruned (0: never; run
	// "syncd reactions prune" from a scheduler instead).
	PruneInterval time.Duration
}

// DefaultReactions returns the spec's defaults: completed reactions are
// kept 30 days, dead letters 90, pruned hourly.
func DefaultReactions() Reactions {
	return Reactions{KeepCompleted: 30 * 24 * time.Hour, KeepDeadLetter: 90 * 24 * time.Hour, PruneInterval: time.Hour}
}

func (r *Reactions) flags(fs *flag.FlagSet) {
	fs.DurationVar(&r.KeepCompleted, "reaction-keep-completed", r.KeepCompleted, "completed durable reactions are deleted this long after they completed")
	fs.DurationVar(&r.KeepDeadLetter, "reaction-keep-dead-letter", r.KeepDeadLetter, "dead-lettered reactions are deleted this long after their last failure (retry them before: syncd reactions retry)")
	fs.DurationVar(&r.PruneInterval, "reaction-prune-interval", r.PruneInterval, "how often completed and dead-lettered reactions past their retention are deleted (0 never; see syncd reactions prune)")
}

func (r Reactions) validate() []error {
	var errs []error
	if r.KeepCompleted <= 0 {
		errs = append(errs, fmt.Errorf("--reaction-keep-completed %s: must be positive", r.KeepCompleted))
	}
	if r.KeepDeadLetter <= 0 {
		errs = append(errs, fmt.Errorf("--reaction-keep-dead-letter %s: must be positive", r.KeepDeadLetter))
	}
	if r.PruneInterval < 0 {
		errs = append(errs, fmt.Errorf("--reaction-prune-interval %s: must not be negative", r.PruneInterval))
	}
	return errs
}
