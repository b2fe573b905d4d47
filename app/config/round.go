package config

import (
	"flag"
	"fmt"
)

// Round are the per-request limits and the wire window of one SSP2 round
// (POST /sync and socket rounds).
type Round struct {
	// MinWireVersion is the oldest admitted wire version: 3 (the 0.24
	// window), 2 (also admit wire-2 clients during an app upgrade) or 1
	// (also the wire-1 clients of the 0.15 window, such as its
	// database-less commit producers, which send no log epoch).
	MinWireVersion int
	// MaxOperations caps the operations of one request across its commits.
	MaxOperations int
	// MaxBodyBytes caps a request body as sent; MaxDecodedBodyBytes after
	// its Content-Encoding is undone.
	MaxBodyBytes        int64
	MaxDecodedBodyBytes int64
}

// DefaultRound returns the reference limits.
func DefaultRound() Round {
	return Round{MinWireVersion: 3, MaxOperations: 500, MaxBodyBytes: 16 << 20, MaxDecodedBodyBytes: 64 << 20}
}

func (r *Round) flags(fs *flag.FlagSet) {
	fs.IntVar(&r.MinWireVersion, "min-wire-version", r.MinWireVersion, "oldest admitted SSP2 wire version: 3, 2 to keep wire-2 clients syncing during an upgrade, or 1 to also admit wire-1 clients (0.15 commit producers without a log epoch)")
	fs.IntVar(&r.MaxOperations, "max-operations", r.MaxOperations, "most push operations one /sync request may carry (all commits together)")
	fs.Int64Var(&r.MaxBodyBytes, "max-body-bytes", r.MaxBodyBytes, "largest /sync request body as sent (413 above)")
	fs.Int64Var(&r.MaxDecodedBodyBytes, "max-decoded-body-bytes", r.MaxDecodedBodyBytes, "largest /sync request body after gzip or zstd decoding (413 above)")
}

func (r Round) validate() []error {
	var errs []error
	if r.MinWireVersion < 1 || r.MinWireVersion > 3 {
		errs = append(errs, fmt.Errorf("--min-wire-version %d: want 1, 2 or 3", r.MinWireVersion))
	}
	if r.MaxOperations < 1 {
		errs = append(errs, fmt.Errorf("--max-operations %d: must be positive", r.MaxOperations))
	}
	if r.MaxBodyBytes < 1 || r.MaxDecodedBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("--max-body-bytes and --max-decoded-body-bytes must be positive"))
	}
	if r.MaxDecodedBodyBytes < r.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--max-decoded-body-bytes must be at least --max-body-bytes"))
	}
	return errs
}
