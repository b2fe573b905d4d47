package config

import (
	"flag"
	"fmt"
	"time"
)

// HTTP are the connection and admission bounds of the sync API listener.
type HTTP struct {
	// BodyReadTimeout bounds how long a /sync request body may take to
	// arrive once its headers are in (0: no bound).
	BodyReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// MaxInflightRequests bounds the /sync requests processed at once;
	// past it requests are answered sync.rate_limited (429).
	MaxInflightRequests int
	// MaxInflightBodyBytes bounds the request-body memory all /sync
	// requests hold together, counted as their buffers grow; past it
	// requests are answered sync.rate_limited (429).
	MaxInflightBodyBytes int64
}

// DefaultHTTP returns bounds for a small (2-core) node.
func DefaultHTTP() HTTP {
	return HTTP{
		BodyReadTimeout:      30 * time.Second,
		IdleTimeout:          60 * time.Second,
		MaxInflightRequests:  64,
		MaxInflightBodyBytes: 64 << 20,
	}
}

func (h *HTTP) flags(fs *flag.FlagSet) {
	fs.DurationVar(&h.BodyReadTimeout, "body-read-timeout", h.BodyReadTimeout, "how long a /sync request body may take to arrive (408 after; 0: no bound)")
	fs.DurationVar(&h.IdleTimeout, "idle-timeout", h.IdleTimeout, "close keep-alive connections of the sync API idle this long")
	fs.IntVar(&h.MaxInflightRequests, "max-inflight-requests", h.MaxInflightRequests, "most /sync requests processed at once (429 sync.rate_limited above)")
	fs.Int64Var(&h.MaxInflightBodyBytes, "max-inflight-body-bytes", h.MaxInflightBodyBytes, "request-body memory all /sync requests may hold together, counted as bodies arrive (429 sync.rate_limited above; at least --max-decoded-body-bytes)")
}

func (h HTTP) validate(s Sync) []error {
	var errs []error
	if h.BodyReadTimeout < 0 || h.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--body-read-timeout must not be negative and --idle-timeout must be positive"))
	}
	if h.MaxInflightRequests < 1 {
		errs = append(errs, fmt.Errorf("--max-inflight-requests %d: must be positive", h.MaxInflightRequests))
	}
	if h.MaxInflightBodyBytes < s.MaxDecodedBodyBytes {
		errs = append(errs, fmt.Errorf("--max-inflight-body-bytes %d: must be at least --max-decoded-body-bytes (%d), or the largest body could never be read",
			h.MaxInflightBodyBytes, s.MaxDecodedBodyBytes))
	}
	return errs
}
