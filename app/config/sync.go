package config

import (
	"flag"
	"fmt"
	"time"
)

// Sync are the per-request limits and the wire window of POST /sync.
type Sync struct {
	// MinWireVersion is the oldest admitted wire version: 3 (the 0.24
	// window) or 2 (also admit wire-2 clients during an app upgrade).
	MinWireVersion int
	// MaxOperations caps the operations of one request across its commits.
	MaxOperations int
	// MaxBodyBytes caps a request body as sent; MaxDecodedBodyBytes after
	// its Content-Encoding is undone.
	MaxBodyBytes        int64
	MaxDecodedBodyBytes int64

	// PullSpoolMemoryBytes is how much of one sync response is buffered in
	// memory for the read-verify before the rest spills to a temporary file.
	PullSpoolMemoryBytes int
	// PullResponseBudgetBytes is the soft cap on one pull response: past
	// it no further bootstrap page or commit (beyond a section's first) is
	// added; the client continues on its next pull. Negative: no cap.
	PullResponseBudgetBytes int64
	// PullCatchUpChanges is the far-behind threshold of SPEC §8.4: an
	// incremental pull whose window holds more matching changes than this
	// (and more than one response carries) is answered through bootstrap
	// segments. 0: off.
	PullCatchUpChanges int
	// PullRecentLogBytes bounds the newest commits the storage keeps in
	// memory, so an incremental pull whose window they hold whole reads no
	// index. 0: none kept.
	PullRecentLogBytes int64

	// PruneInterval is how often the server prunes the commit log (0: never;
	// "syncd prune" runs a pass on demand).
	PruneInterval time.Duration
	// RetentionActiveWindow, RetentionForceAge and RetentionKeepCommits are
	// the §4.6 floors (never below 14 days, 30 days and 1000 commits).
	RetentionActiveWindow time.Duration
	RetentionForceAge     time.Duration
	RetentionKeepCommits  int64
	// ClientRecordRefresh is how long a pull that only moved its cursor
	// may leave the stored client record as it is (0: every pull writes
	// it). At most a tenth of RetentionActiveWindow, so a client that
	// pulls stays well inside the window that makes it active.
	ClientRecordRefresh time.Duration
}

// DefaultSync returns the reference limits.
func DefaultSync() Sync {
	return Sync{
		MinWireVersion: 3, MaxOperations: 500, MaxBodyBytes: 16 << 20, MaxDecodedBodyBytes: 64 << 20,
		PullSpoolMemoryBytes: 4 << 20, PullResponseBudgetBytes: 64 << 20, PullCatchUpChanges: 10_000, PullRecentLogBytes: 16 << 20,
		PruneInterval: time.Hour, RetentionActiveWindow: 14 * 24 * time.Hour,
		RetentionForceAge: 30 * 24 * time.Hour, RetentionKeepCommits: 1000,
		ClientRecordRefresh: 30 * time.Second,
	}
}

func (s *Sync) flags(fs *flag.FlagSet) {
	fs.IntVar(&s.MinWireVersion, "min-wire-version", s.MinWireVersion, "oldest admitted SSP2 wire version: 3, or 2 to keep wire-2 clients syncing during an upgrade")
	fs.IntVar(&s.MaxOperations, "max-operations", s.MaxOperations, "most push operations one /sync request may carry (all commits together)")
	fs.Int64Var(&s.MaxBodyBytes, "max-body-bytes", s.MaxBodyBytes, "largest /sync request body as sent (413 above)")
	fs.Int64Var(&s.MaxDecodedBodyBytes, "max-decoded-body-bytes", s.MaxDecodedBodyBytes, "largest /sync request body after gzip or zstd decoding (413 above)")
	fs.IntVar(&s.PullSpoolMemoryBytes, "pull-spool-memory-bytes", s.PullSpoolMemoryBytes, "bytes of one /sync response kept in memory until the serve gate is re-read; the rest spills to a temporary file")
	fs.Int64Var(&s.PullResponseBudgetBytes, "pull-response-budget-bytes", s.PullResponseBudgetBytes, "soft cap on one pull response: past it no further bootstrap page or commit is added (negative: none)")
	fs.IntVar(&s.PullCatchUpChanges, "pull-catchup-changes", s.PullCatchUpChanges, "a pull whose window holds more matching changes than this is answered with bootstrap segments at a fresh pin instead of the commits (a window with a delete: with a reset); 0: off")
	fs.Int64Var(&s.PullRecentLogBytes, "pull-recent-log-bytes", s.PullRecentLogBytes, "memory for the newest commits of each partition, kept to answer incremental pulls without reading the log's index (0: none)")
	fs.DurationVar(&s.PruneInterval, "prune-interval", s.PruneInterval, "how often the server prunes the commit log (0: never; see syncd prune)")
	fs.DurationVar(&s.RetentionActiveWindow, "retention-active-window", s.RetentionActiveWindow, "clients seen within this window hold the pruning horizon at their cursor (at least 336h)")
	fs.DurationVar(&s.RetentionForceAge, "retention-force-age", s.RetentionForceAge, "commits older than this are pruned regardless of laggard cursors (at least 720h)")
	fs.Int64Var(&s.RetentionKeepCommits, "retention-keep-commits", s.RetentionKeepCommits, "newest commits always kept (at least 1000)")
	fs.DurationVar(&s.ClientRecordRefresh, "client-record-refresh", s.ClientRecordRefresh, "a pull that only moved its cursor leaves a client record younger than this unwritten (0: always write; at most a tenth of --retention-active-window)")
}

func (s Sync) validate() []error {
	var errs []error
	if s.MinWireVersion != 2 && s.MinWireVersion != 3 {
		errs = append(errs, fmt.Errorf("--min-wire-version %d: want 2 or 3", s.MinWireVersion))
	}
	if s.MaxOperations < 1 {
		errs = append(errs, fmt.Errorf("--max-operations %d: must be positive", s.MaxOperations))
	}
	if s.MaxBodyBytes < 1 || s.MaxDecodedBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("--max-body-bytes and --max-decoded-body-bytes must be positive"))
	}
	if s.PullSpoolMemoryBytes < 1 {
		errs = append(errs, fmt.Errorf("--pull-spool-memory-bytes %d: must be positive", s.PullSpoolMemoryBytes))
	}
	if s.PullCatchUpChanges < 0 {
		errs = append(errs, fmt.Errorf("--pull-catchup-changes %d: must not be negative", s.PullCatchUpChanges))
	}
	if s.PullRecentLogBytes < 0 {
		errs = append(errs, fmt.Errorf("--pull-recent-log-bytes %d: must not be negative", s.PullRecentLogBytes))
	}
	if s.PruneInterval < 0 {
		errs = append(errs, fmt.Errorf("--prune-interval %s: must not be negative", s.PruneInterval))
	}
	if s.RetentionActiveWindow < 14*24*time.Hour || s.RetentionForceAge < 30*24*time.Hour || s.RetentionKeepCommits < 1000 {
		errs = append(errs, fmt.Errorf("retention below the protocol floors: --retention-active-window ≥ 336h, --retention-force-age ≥ 720h, --retention-keep-commits ≥ 1000"))
	}
	if s.ClientRecordRefresh < 0 || s.ClientRecordRefresh > s.RetentionActiveWindow/10 {
		errs = append(errs, fmt.Errorf("--client-record-refresh %s: must be between 0 and a tenth of --retention-active-window", s.ClientRecordRefresh))
	}
	if s.MaxDecodedBodyBytes < s.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--max-decoded-body-bytes must be at least --max-body-bytes"))
	}
	return errs
}
