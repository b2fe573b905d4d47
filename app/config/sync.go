package config

import (
	"flag"
	"fmt"
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
}

// DefaultSync returns the reference limits.
func DefaultSync() Sync {
	return Sync{MinWireVersion: 3, MaxOperations: 500, MaxBodyBytes: 16 << 20, MaxDecodedBodyBytes: 64 << 20}
}

func (s *Sync) flags(fs *flag.FlagSet) {
	fs.IntVar(&s.MinWireVersion, "min-wire-version", s.MinWireVersion, "oldest admitted SSP2 wire version: 3, or 2 to keep wire-2 clients syncing during an upgrade")
	fs.IntVar(&s.MaxOperations, "max-operations", s.MaxOperations, "most push operations one /sync request may carry (all commits together)")
	fs.Int64Var(&s.MaxBodyBytes, "max-body-bytes", s.MaxBodyBytes, "largest /sync request body as sent (413 above)")
	fs.Int64Var(&s.MaxDecodedBodyBytes, "max-decoded-body-bytes", s.MaxDecodedBodyBytes, "largest /sync request body after gzip or zstd decoding (413 above)")
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
	if s.MaxDecodedBodyBytes < s.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("--max-decoded-body-bytes must be at least --max-body-bytes"))
	}
	return errs
}
