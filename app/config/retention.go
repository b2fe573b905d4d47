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
	// ToActiveFloorsUnsafe prunes down to the floor of the clients seen
	// within ActiveWindow and no further: no newest commits are kept, no
	// commit is force-pruned by age, and ActiveWindow may go below its
	// 336h floor. It lets load runs and tests race pruning against live
	// traffic and drive real clients into sync.cursor_expired; it breaks
	// the §4.6 minimums, so it is refused unless --listen is a loopback
	// address.
	ToActiveFloorsUnsafe bool
}

// FlagToActiveFloors is the loudly named switch of ToActiveFloorsUnsafe.
const FlagToActiveFloors = "prune-to-active-floors-UNSAFE-for-tests"

// DefaultRetention returns the protocol's floors, pruned hourly.
func DefaultRetention() Retention {
	return Retention{PruneInterval: time.Hour, ActiveWindow: 14 * 24 * time.Hour, ForceAge: 30 * 24 * time.Hour, KeepCommits: 1000}
}

func (r *Retention) flags(fs *flag.FlagSet) {
	fs.DurationVar(&r.PruneInterval, "prune-interval", r.PruneInterval, "how often the server prunes the commit log (0: never; see syncd prune)")
	fs.DurationVar(&r.ActiveWindow, "retention-active-window", r.ActiveWindow, "clients seen within this window hold the pruning horizon at their cursor (at least 336h)")
	fs.DurationVar(&r.ForceAge, "retention-force-age", r.ForceAge, "commits older than this are pruned regardless of laggard cursors (at least 720h)")
	fs.Int64Var(&r.KeepCommits, "retention-keep-commits", r.KeepCommits, "newest commits always kept (at least 1000)")
	fs.BoolVar(&r.ToActiveFloorsUnsafe, FlagToActiveFloors, r.ToActiveFloorsUnsafe, "TESTS AND LOAD RUNS ONLY: prune down to the cursor floor of the clients seen within --retention-active-window (which may then be short), keeping no newest commits and ignoring --retention-force-age and --retention-keep-commits; refused unless --listen is a loopback address")
}

func (r Retention) validate() []error {
	var errs []error
	if r.PruneInterval < 0 {
		errs = append(errs, fmt.Errorf("--prune-interval %s: must not be negative", r.PruneInterval))
	}
	if r.ToActiveFloorsUnsafe {
		if r.ActiveWindow <= 0 {
			errs = append(errs, fmt.Errorf("--retention-active-window %s: must be positive with --%s", r.ActiveWindow, FlagToActiveFloors))
		}
		return errs
	}
	if r.ActiveWindow < 14*24*time.Hour || r.ForceAge < 30*24*time.Hour || r.KeepCommits < 1000 {
		errs = append(errs, fmt.Errorf("retention below the protocol floors: --retention-active-window ≥ 336h, --retention-force-age ≥ 720h, --retention-keep-commits ≥ 1000"))
	}
	return errs
}
