package config

import (
	"flag"
	"fmt"
	"time"
)

// Pull are the bounds of a round's pull half.
type Pull struct {
	// SpoolMemoryBytes is how much of one sync response is buffered in
	// memory for the read-verify before the rest spills to a temporary file.
	SpoolMemoryBytes int
	// ResponseBudgetBytes is the soft cap on one pull response: past it no
	// further bootstrap page or commit (beyond a section's first) is
	// added; the client continues on its next pull. Negative: no cap.
	ResponseBudgetBytes int64
	// CatchUpChanges is the far-behind threshold of SPEC §8.4: an
	// incremental pull whose window holds more matching changes than this
	// (and more than one response carries) is answered through bootstrap
	// segments. 0: off.
	CatchUpChanges int
	// RecentLogBytes bounds the newest commits the storage keeps in
	// memory, so an incremental pull whose window they hold whole reads no
	// index. 0: none kept.
	RecentLogBytes int64
	// ClientRecordRefresh is how long a pull that only moved its cursor
	// may leave the stored client record as it is (0: every pull writes
	// it). At most a tenth of Retention.ActiveWindow, so a client that
	// pulls stays well inside the window that makes it active.
	ClientRecordRefresh time.Duration
}

// DefaultPull returns the defaults.
func DefaultPull() Pull {
	return Pull{SpoolMemoryBytes: 4 << 20, ResponseBudgetBytes: 64 << 20, CatchUpChanges: 10_000, RecentLogBytes: 16 << 20,
		ClientRecordRefresh: 30 * time.Second}
}

func (p *Pull) flags(fs *flag.FlagSet) {
	fs.IntVar(&p.SpoolMemoryBytes, "pull-spool-memory-bytes", p.SpoolMemoryBytes, "bytes of one /sync response kept in memory until the serve gate is re-read; the rest spills to a temporary file")
	fs.Int64Var(&p.ResponseBudgetBytes, "pull-response-budget-bytes", p.ResponseBudgetBytes, "soft cap on one pull response: past it no further bootstrap page or commit is added (negative: none)")
	fs.IntVar(&p.CatchUpChanges, "pull-catchup-changes", p.CatchUpChanges, "a pull whose window holds more matching changes than this is answered with bootstrap segments at a fresh pin instead of the commits (a window with a delete: with a reset); 0: off")
	fs.Int64Var(&p.RecentLogBytes, "pull-recent-log-bytes", p.RecentLogBytes, "memory for the newest commits of each partition, kept to answer incremental pulls without reading the log's index (0: none)")
	fs.DurationVar(&p.ClientRecordRefresh, "client-record-refresh", p.ClientRecordRefresh, "a pull that only moved its cursor leaves a client record younger than this unwritten (0: always write; at most a tenth of --retention-active-window)")
}

// validate checks p; the client record refresh is bounded by the
// retention window r.
func (p Pull) validate(r Retention) []error {
	var errs []error
	if p.SpoolMemoryBytes < 1 {
		errs = append(errs, fmt.Errorf("--pull-spool-memory-bytes %d: must be positive", p.SpoolMemoryBytes))
	}
	if p.CatchUpChanges < 0 {
		errs = append(errs, fmt.Errorf("--pull-catchup-changes %d: must not be negative", p.CatchUpChanges))
	}
	if p.RecentLogBytes < 0 {
		errs = append(errs, fmt.Errorf("--pull-recent-log-bytes %d: must not be negative", p.RecentLogBytes))
	}
	if p.ClientRecordRefresh < 0 || p.ClientRecordRefresh > r.ActiveWindow/10 {
		errs = append(errs, fmt.Errorf("--client-record-refresh %s: must be between 0 and a tenth of --retention-active-window", p.ClientRecordRefresh))
	}
	return errs
}
