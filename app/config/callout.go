package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	dompush "github.com/syncd-dev/syncd/domain/push"
)

// Callout are the settings of the callouts to the team's backend
// (docs/callout.md): --auth callout, --scopes callout, the validators,
// the remote commands and the reaction webhooks.
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
	// Commands names the remote-operation commands the backend runs,
	// comma-separated.
	Commands string
	// CommandTimeout bounds one command's callouts together; they run
	// inside the push transaction, like a validator.
	CommandTimeout time.Duration
	// Reactions names the durable reaction types the backend receives as
	// webhooks, comma-separated.
	Reactions string
	// ReactionTimeout bounds one reaction's webhook.
	ReactionTimeout time.Duration
	// MaxConcurrency bounds the callouts in flight.
	MaxConcurrency int
	// MaxResponseBytes bounds an answer.
	MaxResponseBytes int64
}

// DefaultCallout returns the defaults: no backend.
func DefaultCallout() Callout {
	return Callout{Timeout: 2 * time.Second, ScopesTTL: 30 * time.Second, ValidateTimeout: 200 * time.Millisecond,
		CommandTimeout: 500 * time.Millisecond, ReactionTimeout: 10 * time.Second, MaxConcurrency: 64, MaxResponseBytes: 1 << 20}
}

func (c *Callout) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "callout-url", c.URL, "base URL of the team's backend that answers --auth callout, --scopes callout, the --callout-validate-* validators, --callout-commands and --callout-reactions with JSON over HTTP (docs/callout.md)")
	fs.StringVar(&c.KeyFile, "callout-key-file", c.KeyFile, "--callout-url: file of the keys (32+ bytes each, one per line) every callout is signed with, each key adding a signature (HMAC-SHA256 in Syncd-Signature); required unless --callout-url is a loopback address or --allow-insecure-callout")
	fs.BoolVar(&c.AllowInsecure, "allow-insecure-callout", c.AllowInsecure, "--callout-url: call a non-loopback backend without --callout-key-file (anyone who reaches it can pose as the server)")
	fs.StringVar(&c.ForwardHeaders, "callout-forward-headers", c.ForwardHeaders, "--auth callout: request headers forwarded to the authenticate callout beside Authorization and Cookie, comma-separated")
	fs.DurationVar(&c.Timeout, "callout-timeout", c.Timeout, "--callout-url: bound of an authenticate or resolve-scopes callout, the wait for a free slot included; past it the callout is an outage")
	fs.DurationVar(&c.ScopesTTL, "callout-scopes-ttl", c.ScopesTTL, "--scopes callout: how long an actor's answer serves its partition's requests, so a revocation takes effect within it (0: every request asks; POST /admin/realtime/refresh-scopes drops it)")
	fs.StringVar(&c.ValidateTables, "callout-validate-tables", c.ValidateTables, "--callout-url: tables whose writes the backend validates (SPEC §6.7), comma-separated")
	fs.BoolVar(&c.ValidateCommits, "callout-validate-commits", c.ValidateCommits, "--callout-url: the backend validates every commit as a whole (SPEC §6.8)")
	fs.DurationVar(&c.ValidateTimeout, "callout-validate-timeout", c.ValidateTimeout, "--callout-url: bound of a validate callout; it runs inside the push transaction, so past it the push fails with the retryable sync.rate_limited and the commit is not applied")
	fs.StringVar(&c.Commands, "callout-commands", c.Commands, "--callout-url: remote-operation commands (REMOTE.md) the backend runs at BASE/commands/<name>, comma-separated; their writes commit through the push pipeline")
	fs.DurationVar(&c.CommandTimeout, "callout-command-timeout", c.CommandTimeout, "--callout-url: bound of one command's callouts together; they run inside the push transaction, so past it the command fails with the retryable sync.rate_limited and nothing of it is applied")
	fs.StringVar(&c.Reactions, "callout-reactions", c.Reactions, "--callout-url: durable reaction types (SPEC §6.9) delivered as webhooks to BASE/reactions/<type>, comma-separated; a 2xx completes, anything else retries with backoff")
	fs.DurationVar(&c.ReactionTimeout, "callout-reaction-timeout", c.ReactionTimeout, "--callout-url: bound of one reaction webhook; past it the attempt fails and is retried")
	fs.IntVar(&c.MaxConcurrency, "callout-max-concurrency", c.MaxConcurrency, "--callout-url: callouts in flight at once; more wait within their timeout")
	fs.Int64Var(&c.MaxResponseBytes, "callout-max-response-bytes", c.MaxResponseBytes, "--callout-url: largest answer read; a larger one is an outage")
}

// ValidatedTables lists --callout-validate-tables.
func (c Callout) ValidatedTables() []string { return splitList(c.ValidateTables, false) }

// ForwardedHeaders lists --callout-forward-headers.
func (c Callout) ForwardedHeaders() []string { return splitList(c.ForwardHeaders, false) }

// CommandNames lists --callout-commands.
func (c Callout) CommandNames() []string { return splitList(c.Commands, false) }

// ReactionTypes lists --callout-reactions.
func (c Callout) ReactionTypes() []string { return splitList(c.Reactions, false) }

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
	if c.Callout.Commands != "" {
		by = append(by, "--callout-commands")
	}
	if c.Callout.Reactions != "" {
		by = append(by, "--callout-reactions")
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
		errs = append(errs, errors.New("--callout-url set, but nothing calls it: use --auth callout, --scopes callout, --callout-validate-tables, --callout-validate-commits, --callout-commands or --callout-reactions"))
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
	if k.CommandTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--callout-command-timeout %s: must be positive", k.CommandTimeout))
	}
	if k.ReactionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--callout-reaction-timeout %s: must be positive", k.ReactionTimeout))
	}
	errs = append(errs, distinctNames("--callout-commands", k.CommandNames(), nil)...)
	errs = append(errs, distinctNames("--callout-reactions", k.ReactionTypes(), func(typ string) error {
		if !dompush.ReactionType(typ) {
			return fmt.Errorf("--callout-reactions: %q is not a reaction type (a letter, then letters, digits and . _ - : /, at most %d bytes)", typ, dompush.MaxReactionTypeBytes)
		}
		return nil
	})...)
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

// distinctNames refuses a name listed twice and, with check, a name check
// refuses.
func distinctNames(flag string, names []string, check func(string) error) []error {
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", flag, n))
		}
		seen[n] = true
		if check != nil {
			if err := check(n); err != nil {
				errs = append(errs, err)
			}
		}
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
