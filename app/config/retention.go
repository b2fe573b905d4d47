package config

import (
	"flag"
	"fmt"
	"time"
)

// Retention is the commit log's pruning (SPEC §4.6).
type Retention struct {
	// PruneInterval is how often the server prunes the commit log (0: never;
	// "syncd prune" runs a pass on demand).
	PruneInterval time.Duration
	// ActiveWindow, ForceAge and KeepCommits are the §4.6 floors (never
	// below 14 days, 30 days and 1000 commits).
	ActiveWindow time.Duration
	ForceAge     time.Duration
	KeepCommits  int64
}

// DefaultRetention returns the protocol's floors, pruned hourly.
func DefaultRetention() Retention {
	return Retention{PruneInterval: time.Hour, ActiveWindow: 14 * 24 * time.Hour, ForceAge: 30 * 24 * time.Hour, KeepCommits: 1000}
}

func (r *Retention) flags(fs *flag.FlagSet) {
	fs.DurationVar(&r.PruneInterval, "prune-interval", r.PruneInterval, "how often the server prunes the commit log (0: never; see syncd prune)")
	fs.DurationVar(&r.ActiveWindow, "retention-active-window", r.ActiveWindow, "clients seen within this window hold the pruning horizon at their cursor (at least 336h)")
	fs.DurationVar(&r.ForceAge, "retention-force-age", r.ForceAge, "commits older than this are pruned regardless of laggard cursors (at least 720h)")
	fs.Int64Var(&r.KeepCommits, "retention-keep-commits", r.KeepCommits, "newest commits always kept (at least 1000)")
}

func (r Retention) validate() []error {
	var errs []error
	if r.PruneInterval < 0 {
		errs = append(errs, fmt.Errorf("--prune-interval %s: must not be negative", r.PruneInterval))
	}
	if r.ActiveWindow < 14*24*time.Hour || r.ForceAge < 30*24*time.Hour || r.KeepCommits < 1000 {
		errs = append(errs, fmt.Errorf("retention below the protocol floors: --retention-active-window ≥ 336h, --retention-force-age ≥ 720h, --retention-keep-commits ≥ 1000"))
	}
	return errs
}
