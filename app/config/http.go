package config

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// HTTP are the connection and admission bounds of the sync API listener.
type HTTP struct {
	// BodyReadTimeout bounds how long a /sync request body may take to
	// arrive once its headers are in, and how long a blob transfer may go
	// without progress (0: no bound; see Blobs.MinTransferRate).
	BodyReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// MaxInflightRequests bounds the /sync requests processed at once;
	// past it requests are answered sync.rate_limited (429).
	MaxInflightRequests int
	// MaxInflightBodyBytes bounds the request-body memory all /sync
	// requests hold together, counted as their buffers grow, with the
	// buffers of blob uploads and downloads; past it requests are
	// answered sync.rate_limited (429).
	MaxInflightBodyBytes int64
	// CORSOrigins are the browser origins allowed to call the sync API
	// from another origin: a comma-separated exact list
	// ("https://app.example.com,http://localhost:5173"), or "*" (any,
	// development authentication only). Empty: no CORS.
	CORSOrigins string
	// CORSHeaders are request headers allowed besides the sync API's own.
	CORSHeaders string
	// AccessLog logs one info line per sync API request.
	AccessLog bool
}

// DefaultHTTP returns bounds for a small (2-core) node.
func DefaultHTTP() HTTP {
	return HTTP{
		BodyReadTimeout:      30 * time.Second,
		IdleTimeout:          60 * time.Second,
		MaxInflightRequests:  64,
		MaxInflightBodyBytes: 64 << 20,
		AccessLog:            true,
	}
}

func (h *HTTP) flags(fs *flag.FlagSet) {
	fs.DurationVar(&h.BodyReadTimeout, "body-read-timeout", h.BodyReadTimeout, "how long a /sync request body, a socket round's request or one socket message may take to arrive (408, or close 1008, after), and a blob upload or download may go without progress (0: no bound)")
	fs.DurationVar(&h.IdleTimeout, "idle-timeout", h.IdleTimeout, "close keep-alive connections of the sync API idle this long")
	fs.IntVar(&h.MaxInflightRequests, "max-inflight-requests", h.MaxInflightRequests, "most /sync and /operations requests and socket rounds processed at once (429 sync.rate_limited above; a socket round is answered sync.rate_limited)")
	fs.StringVar(&h.CORSOrigins, "cors-origins", h.CORSOrigins, "browser origins allowed to call the sync API, comma-separated exact origins (https://app.example.com), or * with --auth dev")
	fs.StringVar(&h.CORSHeaders, "cors-headers", h.CORSHeaders, "request headers browsers may send besides the sync API's own (comma-separated)")
	fs.BoolVar(&h.AccessLog, "access-log", h.AccessLog, "log one info line per sync API request (method, route, status, code, duration, bytes, actor, partition, request id)")
	fs.Int64Var(&h.MaxInflightBodyBytes, "max-inflight-body-bytes", h.MaxInflightBodyBytes, "request-body memory all /sync requests, socket rounds and socket messages arriving, and the buffers of blob uploads and downloads may hold together, counted as bodies arrive (429 sync.rate_limited, or close 1013, above; at least --max-decoded-body-bytes)")
}

func (h HTTP) validate(s Round) []error {
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

// CORSOriginList is CORSOrigins split and trimmed.
func (h HTTP) CORSOriginList() []string { return splitList(h.CORSOrigins, true) }

// CORSHeaderList is CORSHeaders split and trimmed.
func (h HTTP) CORSHeaderList() []string { return splitList(h.CORSHeaders, false) }

func splitList(s string, origins bool) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if origins {
				p = strings.TrimSuffix(p, "/")
			}
			out = append(out, p)
		}
	}
	return out
}

// validateCORS checks the origins: exact scheme://host[:port] origins, or
// "*" alone and only with development authentication (any page on the web
// could otherwise drive a user's token-bearing client against the server).
func (h HTTP) validateCORS(auth string) []error {
	var errs []error
	os := h.CORSOriginList()
	for _, o := range os {
		if o == "*" {
			if len(os) > 1 {
				errs = append(errs, errors.New("--cors-origins: * stands alone"))
			}
			if auth != AuthDev {
				errs = append(errs, errors.New("--cors-origins *: only with --auth dev; list the app's origins (https://app.example.com)"))
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("--cors-origins %q: want an origin like https://app.example.com (scheme, host, optional port)", o))
		}
	}
	return errs
}
