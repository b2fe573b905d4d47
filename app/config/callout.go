package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Callout are the settings of the callouts to the team's backend
// (docs/callout.md): --auth callout, --scopes callout and the validators.
type Callout struct {
	// URL is the backend's base URL; each callback posts to URL/<path>.
	URL string
	// KeyFile holds the keys that sign every callout, one per line (32+
	// bytes each); every key signs, so a key rotates by adding the new
	// one, then dropping the old once the backend verifies with the new.
	KeyFile string
	// AllowInsecure lets a non-loopback URL go without KeyFile.
	AllowInsecure bool
	// ForwardHeaders are request headers forwarded to authenticate
	// beside Authorization and Cookie, comma-separated.
	ForwardHeaders string
	// Timeout bounds an authenticate or resolve-scopes callout.
	Timeout time.Duration
	// ScopesTTL is how long a resolve-scopes answer serves its actor (0:
	// every resolution asks).
	ScopesTTL time.Duration
	// ValidateTables names the tables the backend validates,
	// comma-separated; ValidateCommits adds the whole-commit validator.
	ValidateTables  string
	ValidateCommits bool
	// ValidateTimeout bounds a validate callout, which runs inside the
	// push transaction: past it the push fails retryable, unapplied.
	ValidateTimeout time.Duration
	// MaxConcurrency bounds the callouts in flight.
	MaxConcurrency int
	// MaxResponseBytes bounds an answer.
	MaxResponseBytes int64
}

// DefaultCallout returns the defaults: no backend.
func DefaultCallout() Callout {
	return Callout{Timeout: 2 * time.Second, ScopesTTL: 30 * time.Second, ValidateTimeout: 200 * time.Millisecond,
		MaxConcurrency: 64, MaxResponseBytes: 1 << 20}
}

func (c *Callout) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "callout-url", c.URL, "base URL of the team's backend that answers --auth callout, --scopes callout and the --callout-validate-* validators with JSON over HTTP (docs/callout.md)")
	fs.StringVar(&c.KeyFile, "callout-key-file", c.KeyFile, "--callout-url: file of the keys (32+ bytes each, one per line) every callout is signed with, each key adding a signature (HMAC-SHA256 in Syncd-Signature); required unless --callout-url is a loopback address or --allow-insecure-callout")
	fs.BoolVar(&c.AllowInsecure, "allow-insecure-callout", c.AllowInsecure, "--callout-url: call a non-loopback backend without --callout-key-file (anyone who reaches it can pose as the server)")
	fs.StringVar(&c.ForwardHeaders, "callout-forward-headers", c.ForwardHeaders, "--auth callout: request headers forwarded to the authenticate callout beside Authorization and Cookie, comma-separated")
	fs.DurationVar(&c.Timeout, "callout-timeout", c.Timeout, "--callout-url: bound of an authenticate or resolve-scopes callout, the wait for a free slot included; past it the callout is an outage")
	fs.DurationVar(&c.ScopesTTL, "callout-scopes-ttl", c.ScopesTTL, "--scopes callout: how long an actor's answer serves its partition's requests, so a revocation takes effect within it (0: every request asks; POST /admin/realtime/refresh-scopes drops it)")
	fs.StringVar(&c.ValidateTables, "callout-validate-tables", c.ValidateTables, "--callout-url: tables whose writes the backend validates (SPEC §6.7), comma-separated")
	fs.BoolVar(&c.ValidateCommits, "callout-validate-commits", c.ValidateCommits, "--callout-url: the backend validates every commit as a whole (SPEC §6.8)")
	fs.DurationVar(&c.ValidateTimeout, "callout-validate-timeout", c.ValidateTimeout, "--callout-url: bound of a validate callout; it runs inside the push transaction, so past it the push fails with the retryable sync.rate_limited and the commit is not applied")
	fs.IntVar(&c.MaxConcurrency, "callout-max-concurrency", c.MaxConcurrency, "--callout-url: callouts in flight at once; more wait within their timeout")
	fs.Int64Var(&c.MaxResponseBytes, "callout-max-response-bytes", c.MaxResponseBytes, "--callout-url: largest answer read; a larger one is an outage")
}

// ValidatedTables lists --callout-validate-tables.
func (c Callout) ValidatedTables() []string { return splitList(c.ValidateTables, false) }

// ForwardedHeaders lists --callout-forward-headers.
func (c Callout) ForwardedHeaders() []string { return splitList(c.ForwardHeaders, false) }

// calloutUsed names the settings that call the backend.
func (c *Config) calloutUsed() []string {
	var by []string
	if c.Auth == AuthCallout {
		by = append(by, "--auth callout")
	}
	if c.Scopes == ScopesCallout {
		by = append(by, "--scopes callout")
	}
	if c.Callout.ValidateTables != "" {
		by = append(by, "--callout-validate-tables")
	}
	if c.Callout.ValidateCommits {
		by = append(by, "--callout-validate-commits")
	}
	return by
}

// validateCallout checks the callout settings once --auth is resolved:
// a backend only with a callback that calls it and the other way round,
// and never an unsigned non-loopback backend unless allowed.
func (c *Config) validateCallout() []error {
	var errs []error
	k := c.Callout
	by := c.calloutUsed()
	if k.URL == "" {
		if len(by) > 0 {
			errs = append(errs, fmt.Errorf("%s needs --callout-url (the backend that answers it)", strings.Join(by, ", ")))
		}
		var set []string
		if k.KeyFile != "" {
			set = append(set, "--callout-key-file")
		}
		if k.AllowInsecure {
			set = append(set, "--allow-insecure-callout")
		}
		if k.ForwardHeaders != "" {
			set = append(set, "--callout-forward-headers")
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set, but only used with --callout-url", strings.Join(set, ", ")))
		}
		return errs
	}
	if len(by) == 0 {
		errs = append(errs, errors.New("--callout-url set, but nothing calls it: use --auth callout, --scopes callout, --callout-validate-tables or --callout-validate-commits"))
	}
	u, err := url.Parse(k.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("--callout-url %q: want an http(s) URL", redactURL(k.URL)))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("--callout-url %q: no user info, query or fragment (credentials in it would reach the logs; sign with --callout-key-file)", redactURL(k.URL)))
	case !loopbackHost(u.Hostname()) && k.KeyFile == "" && !k.AllowInsecure:
		errs = append(errs, fmt.Errorf("--callout-url %s is not a loopback address: --callout-key-file is required, so the backend can tell the server's callouts from anyone's "+
			"(or pass --allow-insecure-callout to accept that)", u.Host))
	}
	if k.AllowInsecure && k.KeyFile != "" {
		errs = append(errs, errors.New("--allow-insecure-callout only applies without --callout-key-file"))
	}
	if k.ForwardHeaders != "" && c.Auth != AuthCallout {
		errs = append(errs, fmt.Errorf("--callout-forward-headers set, but only used with --auth callout (--auth is %s)", c.Auth))
	}
	for _, h := range k.ForwardedHeaders() {
		if !validHeaderName(h) {
			errs = append(errs, fmt.Errorf("--callout-forward-headers: %q is not a header name", h))
		}
	}
	if k.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--callout-timeout %s: must be positive", k.Timeout))
	}
	if k.ValidateTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--callout-validate-timeout %s: must be positive", k.ValidateTimeout))
	}
	if k.ScopesTTL < 0 {
		errs = append(errs, fmt.Errorf("--callout-scopes-ttl %s: must not be negative", k.ScopesTTL))
	}
	if k.MaxConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--callout-max-concurrency %d: must be at least 1", k.MaxConcurrency))
	}
	if k.MaxResponseBytes < 1 {
		errs = append(errs, fmt.Errorf("--callout-max-response-bytes %d: must be at least 1", k.MaxResponseBytes))
	}
	return errs
}

// loopbackHost reports whether a URL's host names a loopback address
// (localhost, 127.0.0.0/8, ::1). A name that resolves to one does not
// count: what it resolves to may change.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether s is an HTTP header name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
