// Package config loads the server configuration from flags, SYNCD_*
// environment variables and an optional YAML file, in that precedence.
//
// Every setting has one name used three ways: the flag --admin-listen, the
// environment variable SYNCD_ADMIN_LISTEN and the YAML key admin-listen.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix prefixes every environment variable the server reads.
const EnvPrefix = "SYNCD_"

// Defaults of the embedded development setup.
const (
	DefaultListen      = "127.0.0.1:8787"
	DefaultAdminListen = "127.0.0.1:8788"
	DefaultDatabase    = "./syncd.db"
	// DefaultJWTLeeway is the clock skew tolerated on exp, nbf and iat.
	DefaultJWTLeeway = 60 * time.Second
	// DefaultJWKSRefresh is how often the JWKS is fetched again.
	DefaultJWKSRefresh = 5 * time.Minute
	// DefaultJWKSMinRefetch is the least time between two fetches that
	// tokens with an unknown kid prompt.
	DefaultJWKSMinRefetch = 10 * time.Second
)

// Auth modes.
const (
	AuthDev = "dev"
	AuthJWT = "jwt"
	// AuthHost is for programs that embed the server: they supply
	// ports.Authenticator and ports.ScopeResolver themselves (fx.Decorate,
	// see examples/embed); the server refuses to start without them.
	AuthHost = "host"
	// AuthCallout asks the backend of --callout-url (docs/callout.md).
	AuthCallout = "callout"
)

// Scope sources (--scopes): where a request's allowed scopes come from.
const (
	// ScopesAuth: the --auth mode's own grant (the JWT claim, the dev
	// header, the authenticate callout's answer; a host's resolver).
	ScopesAuth = "auth"
	// ScopesCallout: the backend's resolve-scopes, beside any --auth.
	ScopesCallout = "callout"
	// ScopesRules computes the grant with the scopes rule of --rules.
	ScopesRules = "rules"
)

// Config is the whole `syncd serve` configuration.
type Config struct {
	// Listen is host:port of the sync API.
	Listen string
	// AdminListen is host:port of /livez, /readyz, /metrics and pprof.
	AdminListen string
	// Database is a SQLite file path, sqlite:PATH, or a postgres:// URL.
	Database string
	// Schema is the path of the current schema IR file; empty (and no
	// SchemaWindow.File) serves the embedded demo schema.
	Schema string
	// SchemaWindow holds the older schema versions served beside the
	// current one (SPEC §9).
	SchemaWindow SchemaWindow
	// Operations is the path of a JSON file declaring registered remote
	// queries (POST <mount>/operations); empty registers none.
	Operations string
	// Watches bounds the live query watches of those queries.
	Watches Watches
	// Mount is the route prefix of the sync API ("" or "/path").
	Mount string
	// Checkpoints are the backfill checkpoints this process declares at
	// the running schema version, comma-separated partition/name: it
	// serves while they backfill (see CheckpointList).
	Checkpoints string
	// Auth selects request authentication (dev, jwt or callout). Empty resolves to
	// dev for the embedded demo schema and is an error otherwise.
	Auth string
	// Scopes is where allowed scopes come from: ScopesAuth,
	// ScopesCallout or ScopesRules.
	Scopes string
	// Callout configures the callouts to the team's backend.
	Callout Callout
	// DevAuth configures --auth dev.
	DevAuth DevAuth
	// JWT configures --auth jwt.
	JWT JWT
	// Rules configures the declarative rules of --rules.
	Rules Rules
	// Dev turns on human-readable logs.
	Dev bool
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// ShutdownDelay is how long the listeners keep serving after a stop
	// signal turned /readyz to draining, so load balancers notice first.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the in-flight requests' finish after the delay.
	ShutdownTimeout time.Duration
	// HTTP holds the connection and admission bounds of the sync API.
	HTTP HTTP
	// Round holds the per-request limits of a round; Pull the bounds of
	// its pull half; Retention the commit log's pruning.
	Round     Round
	Pull      Pull
	Retention Retention
	// Segments holds the segment store and download settings.
	Segments Segments
	// Blobs holds the blob store, its limits and the blob GC (the
	// orphan sweep).
	Blobs Blobs
	// Realtime holds the realtime channel's settings.
	Realtime Realtime
	// Leases holds the auth-lease settings (off by default).
	Leases Leases
	// Reactions holds the durable reactions' retention.
	Reactions Reactions
	// KeyReloadInterval is how often the key files (signed URLs, auth
	// leases, JWT, callouts) are read again for a rotation (0: only on SIGHUP).
	KeyReloadInterval time.Duration
	// Limits bound identifiers and request shape.
	Limits Limits
	// Admin holds the admin listener's access settings.
	Admin Admin
	// Fanout is how commit notices and realtime events reach the other
	// nodes: auto, local, postgres or nats.
	Fanout string
	// NATS holds the settings of --fanout nats.
	NATS NATS
	// TestControlListen is host:port of the conformance test-control
	// plane; empty (the default) leaves it out entirely.
	TestControlListen string
	// TestControlMaxInstances caps the plane's live test instances.
	TestControlMaxInstances int
	// TestControlMaxBytes is the storage the live test instances share:
	// each gets an equal part (TestControlMaxBytes/TestControlMaxInstances).
	TestControlMaxBytes int64
	// TestControlDatabase, a postgres:// URL, puts each test instance in a
	// PostgreSQL schema of its own on that database; empty keeps each in
	// a SQLite file.
	TestControlDatabase string
	// TestControlDatabaseMaxConns caps the plane's PostgreSQL connections.
	TestControlDatabaseMaxConns int
	// ConfigFile is the YAML file the values came from, if any.
	ConfigFile string
}

// DevAuth are the settings of development authentication.
type DevAuth struct {
	// Actor is the actor of requests that name none; empty refuses them.
	Actor string
	// Partition is the partition of requests that name none.
	Partition string
	// AllowInsecure lets --auth dev start on a non-loopback --listen.
	AllowInsecure bool
}

// JWT are the settings of bearer-token authentication.
type JWT struct {
	// Algorithm is HS256, RS256 or EdDSA with KeyFile, the only one
	// accepted; with JWKSURL it is optional (RS256, EdDSA or ES256) and
	// narrows the keys' algorithms to that one.
	Algorithm string
	// KeyFile holds the HS256 secret or the PEM public key.
	KeyFile string
	// JWKSURL is where the JWK set is fetched; exclusive with KeyFile.
	JWKSURL string
	// JWKSRefresh is the background refresh interval (jittered ±10%).
	JWKSRefresh time.Duration
	// JWKSMinRefetch rate-limits the refetch an unknown kid prompts.
	JWKSMinRefetch time.Duration
	// JWKSLazy starts without a first successful fetch.
	JWKSLazy bool
	// Issuer and Audience, when set, must match the token.
	Issuer   string
	Audience string
	// Claim names (empty: the adapter's defaults sub, partition, scopes).
	ActorClaim     string
	PartitionClaim string
	ScopesClaim    string
	// TokenQueryParam also reads the token from this query parameter.
	TokenQueryParam string
	// Leeway tolerates clock skew on exp, nbf and iat (0: none).
	Leeway time.Duration
}

// validateKey checks that exactly one key source is set and that the
// algorithm suits it.
func (j JWT) validateKey() []error {
	var errs []error
	switch {
	case j.KeyFile != "" && j.JWKSURL != "":
		errs = append(errs, errors.New("--jwt-key-file and --jwt-jwks-url are exclusive: set one"))
	case j.KeyFile == "" && j.JWKSURL == "":
		errs = append(errs, errors.New("--auth jwt needs --jwt-key-file or --jwt-jwks-url"))
	case j.KeyFile != "":
		switch j.Algorithm {
		case "HS256", "RS256", "EdDSA":
		default:
			errs = append(errs, fmt.Errorf("--jwt-algorithm %q: want HS256, RS256 or EdDSA with --jwt-key-file", j.Algorithm))
		}
	default:
		switch j.Algorithm {
		case "", "RS256", "EdDSA", "ES256":
		default:
			errs = append(errs, fmt.Errorf("--jwt-algorithm %q: want RS256, EdDSA, ES256 or none with --jwt-jwks-url (a JWKS never supplies HMAC keys)", j.Algorithm))
		}
		if u, err := url.Parse(j.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--jwt-jwks-url %q: want an http(s) URL", j.JWKSURL))
		}
	}
	if j.JWKSRefresh <= 0 {
		errs = append(errs, fmt.Errorf("--jwt-jwks-refresh %s: must be positive", j.JWKSRefresh))
	}
	if j.JWKSMinRefetch <= 0 {
		errs = append(errs, fmt.Errorf("--jwt-jwks-min-refetch %s: must be positive", j.JWKSMinRefetch))
	}
	return errs
}

// Default returns the configuration of a bare `syncd serve`.
func Default() Config {
	return Config{
		Listen:            DefaultListen,
		AdminListen:       DefaultAdminListen,
		Database:          DefaultDatabase,
		LogLevel:          "info",
		ShutdownDelay:     5 * time.Second,
		ShutdownTimeout:   15 * time.Second,
		HTTP:              DefaultHTTP(),
		Round:             DefaultRound(),
		Pull:              DefaultPull(),
		Retention:         DefaultRetention(),
		Segments:          DefaultSegments(),
		Blobs:             DefaultBlobs(),
		Realtime:          DefaultRealtime(),
		Watches:           DefaultWatches(),
		Leases:            DefaultLeases(),
		Reactions:         DefaultReactions(),
		KeyReloadInterval: 30 * time.Second,
		Limits:            DefaultLimits(),
		JWT:               JWT{Leeway: DefaultJWTLeeway, JWKSRefresh: DefaultJWKSRefresh, JWKSMinRefetch: DefaultJWKSMinRefetch},
		Fanout:            FanoutAuto,
		NATS:              DefaultNATS(),
		Scopes:            ScopesAuth,
		Callout:           DefaultCallout(),

		TestControlMaxInstances: DefaultTestControlMaxInstances,
		TestControlMaxBytes:     DefaultTestControlMaxBytes,

		TestControlDatabaseMaxConns: DefaultTestControlDatabaseMaxConns,
	}
}

// DemoSchema reports whether the embedded demo schema is served.
func (c Config) DemoSchema() bool { return c.Schema == "" && c.SchemaWindow.File == "" }

// DatabaseKind is the storage engine a Database value selects.
type DatabaseKind string

// Database kinds.
const (
	SQLite   DatabaseKind = "sqlite"
	Postgres DatabaseKind = "postgres"
)

// ParseDatabase splits a --database value into its engine and the DSN or
// file path the engine opens.
func ParseDatabase(v string) (DatabaseKind, string, error) {
	switch {
	case strings.HasPrefix(v, "postgres://"), strings.HasPrefix(v, "postgresql://"):
		return Postgres, v, nil
	case strings.HasPrefix(v, "sqlite:"):
		p := strings.TrimPrefix(v, "sqlite:")
		p = strings.TrimPrefix(p, "//")
		if p == "" {
			return "", "", errors.New("database: sqlite: needs a file path")
		}
		return SQLite, p, nil
	case v == "":
		return "", "", errors.New("database: empty")
	case strings.Contains(v, "://"):
		return "", "", fmt.Errorf("database: unsupported URL scheme in %q (use a SQLite path, sqlite:PATH or postgres://)", redactURL(v))
	default:
		return SQLite, v, nil
	}
}

// Validate checks values and resolves the auth default.
func (c *Config) Validate() error {
	var errs []error
	for _, a := range []struct{ name, v string }{{"listen", c.Listen}, {"admin-listen", c.AdminListen}} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: want host:port", a.name, a.v))
		}
	}
	if c.Listen == c.AdminListen && !strings.HasSuffix(c.Listen, ":0") {
		errs = append(errs, errors.New("--listen and --admin-listen must differ"))
	}
	if _, _, err := ParseDatabase(c.Database); err != nil {
		errs = append(errs, err)
	}
	if c.Mount != "" && (!strings.HasPrefix(c.Mount, "/") || strings.HasSuffix(c.Mount, "/") ||
		strings.ContainsAny(c.Mount, " {}?#")) {
		errs = append(errs, fmt.Errorf("--mount %q: want empty or /path without a trailing slash", c.Mount))
	}
	if _, err := c.CheckpointList(); err != nil {
		errs = append(errs, err)
	}
	switch c.Auth {
	case "":
		if c.DemoSchema() || c.Dev {
			c.Auth = AuthDev
		} else {
			errs = append(errs, errors.New("--auth is required with --schema or --schema-window (dev, jwt or callout; --dev implies dev)"))
		}
	case AuthDev, AuthHost, AuthCallout:
	case AuthJWT:
		errs = append(errs, c.JWT.validateKey()...)
		if c.JWT.Leeway < 0 {
			errs = append(errs, fmt.Errorf("--jwt-leeway %s: must not be negative", c.JWT.Leeway))
		}
	default:
		errs = append(errs, fmt.Errorf("--auth %q: want dev, jwt or callout", c.Auth))
	}
	switch c.Scopes {
	case ScopesAuth, ScopesCallout, ScopesRules:
	default:
		errs = append(errs, fmt.Errorf("--scopes %q: want auth, callout or rules", c.Scopes))
	}
	errs = append(errs, c.Rules.validate(c.Scopes)...)
	errs = append(errs, c.validateSchema()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	errs = append(errs, c.Round.validate()...)
	errs = append(errs, c.Pull.validate(c.Retention)...)
	errs = append(errs, c.Retention.validate()...)
	errs = append(errs, c.Segments.validate()...)
	errs = append(errs, c.Blobs.validate(c.Segments)...)
	errs = append(errs, c.Realtime.validate()...)
	errs = append(errs, c.Watches.validate()...)
	errs = append(errs, c.Leases.validate()...)
	errs = append(errs, c.Reactions.validate()...)
	if c.KeyReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("--key-reload-interval %s: must not be negative", c.KeyReloadInterval))
	}
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.validateExposure()...)
	errs = append(errs, c.validateCallout()...)
	errs = append(errs, c.HTTP.validate(c.Round)...)
	errs = append(errs, c.HTTP.validateCORS(c.Auth)...)
	if c.ShutdownDelay < 0 {
		errs = append(errs, errors.New("--shutdown-delay must not be negative"))
	}
	errs = append(errs, c.validateTestControl()...)
	errs = append(errs, c.validateFanout()...)
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Redacted returns a copy safe to log or print: credentials in the
// database and NATS URLs are masked.
func (c Config) Redacted() Config {
	c.Database = redactURL(c.Database)
	c.TestControlDatabase = redactURL(c.TestControlDatabase)
	c.NATS.URL = redactNATSURL(c.NATS.URL)
	return c
}

func redactURL(v string) string {
	at := strings.LastIndex(v, "@")
	scheme := strings.Index(v, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return v
	}
	userinfo := v[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return v[:scheme+3] + userinfo[:i] + ":xxxxx" + v[at:]
	}
	return v
}

// Print writes every setting of c (credentials masked) as "name: value"
// lines, one per flag in flag order, so it never lags behind the flags.
func (c Config) Print(w io.Writer) {
	r := c.Redacted()
	fs := flagSet(&r, nil, nil)
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if s, isString := g.Get().(string); isString {
				_, _ = fmt.Fprintf(w, "%s: %q\n", f.Name, s)
				return
			}
		}
		_, _ = fmt.Fprintf(w, "%s: %s\n", f.Name, f.Value)
	})
	if c.ConfigFile != "" {
		_, _ = fmt.Fprintf(w, "config: %q\n", c.ConfigFile)
	}
}

// CheckpointRef names one checkpoint of --checkpoints.
type CheckpointRef struct{ Partition, Name string }

// CheckpointList parses --checkpoints.
func (c Config) CheckpointList() ([]CheckpointRef, error) {
	var out []CheckpointRef
	for _, item := range strings.Split(c.Checkpoints, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, n, ok := strings.Cut(item, "/")
		if !ok || p == "" || n == "" {
			return nil, fmt.Errorf("--checkpoints %q: want partition/name, comma-separated", item)
		}
		out = append(out, CheckpointRef{Partition: p, Name: n})
	}
	return out, nil
}

// flagSet binds every setting of c to a flag.
func flagSet(c *Config, configFile *string, printConfig *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("syncd serve", flag.ContinueOnError)
	fs.StringVar(&c.Listen, "listen", c.Listen, "host:port of the sync API")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "host:port of the admin listener (/livez, /readyz, /metrics, /debug/pprof)")
	fs.StringVar(&c.Database, "database", c.Database, "SQLite file path, sqlite:PATH, or postgres:// URL")
	c.schemaFlags(fs)
	fs.StringVar(&c.Operations, "operations", c.Operations, "JSON file declaring registered remote queries against the synced tables for POST <mount>/operations, and the typegen descriptors (syncular.queries.ir.json) to register (see docs/operations.md)")
	fs.StringVar(&c.Mount, "mount", c.Mount, "route prefix of the sync API, e.g. /api/sync (default empty)")
	fs.StringVar(&c.Checkpoints, "checkpoints", c.Checkpoints, "backfill checkpoints this process declares at the running schema version, comma-separated partition/name: it serves while they backfill (see syncd checkpoint)")
	fs.StringVar(&c.Auth, "auth", c.Auth, "request authentication: dev, jwt or callout (the backend of --callout-url; default dev with the demo schema or --dev, required otherwise)")
	fs.StringVar(&c.Scopes, "scopes", c.Scopes, "where a request's allowed scopes come from: auth (what --auth grants: the JWT claim, the dev header, the authenticate callout's answer), callout (the backend of --callout-url, beside any --auth) or rules (the scopes rule of --rules)")
	fs.StringVar(&c.DevAuth.Actor, "dev-actor", c.DevAuth.Actor, "--auth dev: actor of requests without an X-Syncd-Actor header (default: refuse them)")
	fs.StringVar(&c.DevAuth.Partition, "dev-partition", c.DevAuth.Partition, "--auth dev: partition of requests without an X-Syncd-Partition header (default \"default\")")
	fs.StringVar(&c.JWT.Algorithm, "jwt-algorithm", c.JWT.Algorithm, "--auth jwt: the accepted algorithm, HS256, RS256 or EdDSA (with --jwt-jwks-url optional: RS256, EdDSA or ES256)")
	fs.StringVar(&c.JWT.KeyFile, "jwt-key-file", c.JWT.KeyFile, "--auth jwt: file with the HS256 secret or the PEM public key (or use --jwt-jwks-url)")
	fs.StringVar(&c.JWT.JWKSURL, "jwt-jwks-url", c.JWT.JWKSURL, "--auth jwt: URL of the issuer's JWK set; the token's kid picks the key (start fails if it cannot be fetched, unless --jwt-jwks-lazy)")
	fs.DurationVar(&c.JWT.JWKSRefresh, "jwt-jwks-refresh", c.JWT.JWKSRefresh, "--auth jwt: how often the JWK set is fetched again (jittered ±10%)")
	fs.DurationVar(&c.JWT.JWKSMinRefetch, "jwt-jwks-min-refetch", c.JWT.JWKSMinRefetch, "--auth jwt: least time between two fetches prompted by tokens with an unknown kid")
	fs.BoolVar(&c.JWT.JWKSLazy, "jwt-jwks-lazy", c.JWT.JWKSLazy, "--auth jwt: start even if the JWK set cannot be fetched yet (tokens are refused until it is)")
	fs.StringVar(&c.JWT.Issuer, "jwt-issuer", c.JWT.Issuer, "--auth jwt: required iss claim, if set")
	fs.StringVar(&c.JWT.Audience, "jwt-audience", c.JWT.Audience, "--auth jwt: required aud claim, if set")
	fs.StringVar(&c.JWT.ActorClaim, "jwt-actor-claim", c.JWT.ActorClaim, "--auth jwt: claim holding the actor id (default sub)")
	fs.StringVar(&c.JWT.PartitionClaim, "jwt-partition-claim", c.JWT.PartitionClaim, "--auth jwt: claim holding the partition (default partition)")
	fs.StringVar(&c.JWT.ScopesClaim, "jwt-scopes-claim", c.JWT.ScopesClaim, "--auth jwt: claim holding the allowed scopes (default scopes)")
	fs.StringVar(&c.JWT.TokenQueryParam, "jwt-token-query-param", c.JWT.TokenQueryParam, "--auth jwt: also read the token from this query parameter (WebSocket upgrades)")
	fs.DurationVar(&c.JWT.Leeway, "jwt-leeway", c.JWT.Leeway, "--auth jwt: clock skew tolerated on exp, nbf and iat (a token issued further in the future is refused; 0: none)")
	c.Rules.flags(fs)
	fs.BoolVar(&c.Dev, "dev", c.Dev, "development mode: human-readable logs; implies --auth dev when --auth is unset")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay", c.ShutdownDelay, "on SIGTERM, how long /readyz answers draining while the listeners keep serving, before they close (0: none)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "after the shutdown delay, how long in-flight requests may take to finish")
	c.HTTP.flags(fs)
	c.Round.flags(fs)
	c.Pull.flags(fs)
	c.Retention.flags(fs)
	c.Segments.flags(fs)
	c.Blobs.flags(fs)
	c.Realtime.flags(fs)
	c.Watches.flags(fs)
	c.Leases.flags(fs)
	c.Reactions.flags(fs)
	c.Callout.flags(fs)
	fs.DurationVar(&c.KeyReloadInterval, "key-reload-interval", c.KeyReloadInterval, "how often --signed-url-key-file, --auth-lease-key-file, --jwt-key-file and --callout-key-file are read again, so a key rotates without a restart (also on SIGHUP; 0: only on SIGHUP)")
	c.Limits.flags(fs)
	c.exposureFlags(fs)
	c.testControlFlags(fs)
	c.fanoutFlags(fs)
	if configFile != nil {
		fs.StringVar(configFile, "config", *configFile, "optional YAML file with the same keys as the flags")
	}
	if printConfig != nil {
		fs.BoolVar(printConfig, "print-config", false, "print the effective configuration (credentials masked) and exit")
	}
	return fs
}

// EnvName is the environment variable of a flag name.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Result is the outcome of Load.
type Result struct {
	Config Config
	// PrintConfig is set when --print-config asked to print and exit.
	PrintConfig bool
}

// ErrHelp is returned when --help was asked for; usage has been printed.
var ErrHelp = flag.ErrHelp

// Load builds the configuration: defaults, then the YAML file (--config or
// SYNCD_CONFIG), then SYNCD_* variables from environ, then args. Usage and
// errors go to out.
func Load(args, environ []string, out io.Writer) (Result, error) {
	return LoadFor(serveUsage, args, environ, out)
}

// serveUsage heads "syncd serve --help".
const serveUsage = `Usage: syncd serve [flags]

Runs the sync server. With no flags it serves the embedded todos demo schema
from the SQLite file ./syncd.db on ` + DefaultListen + ` with development
authentication.

Memory: every client's share is bounded, and so is the node's. Node-wide:
--max-inflight-body-bytes holds the bodies, socket rounds, socket messages
and blob transfers arriving at once, --max-inflight-requests the requests
and socket rounds served at once, --realtime-send-budget-bytes what all
sockets have queued to send. Per client: --max-decoded-body-bytes (a body
or a socket round), --body-read-timeout (a body, round, socket message or
stalled blob transfer), --realtime-send-queue-bytes, --realtime-presence-*,
--blob-max-bytes, --blob-min-transfer-rate, --operations-max-watches*,
--realtime-max-sockets*. docs/limits.md lists every bound with its default.
`

// LoadFor is Load for a command that takes the server's flags (syncd
// prune): header heads its --help.
func LoadFor(header string, args, environ []string, out io.Writer) (Result, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}

	// First pass: find --config and --help without touching the result.
	probe := Default()
	probeFile := env[EnvName("config")]
	var probePrint bool
	pfs := flagSet(&probe, &probeFile, &probePrint)
	// The flag package would print the whole help with every error: only
	// --help gets it, an error gets one line that names the fix.
	pfs.SetOutput(io.Discard)
	pfs.Usage = func() {}
	if err := pfs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(out, header, pfs)
			return Result{}, err
		}
		return Result{}, explainFlagError(pfs, err)
	}
	if pfs.NArg() > 0 {
		return Result{}, fmt.Errorf("unexpected argument %q", pfs.Arg(0))
	}

	c := Default()
	var file string
	var printCfg bool
	fs := flagSet(&c, &file, &printCfg)
	fs.SetOutput(io.Discard)

	if probeFile != "" {
		if err := applyYAML(fs, probeFile); err != nil {
			return Result{}, err
		}
		c.ConfigFile = probeFile
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	nextSource(fs)
	for _, name := range names {
		if name == "config" {
			continue
		}
		if v, ok := env[EnvName(name)]; ok {
			if err := fs.Set(name, v); err != nil {
				return Result{}, fmt.Errorf("%s: %w", EnvName(name), err)
			}
		}
	}
	nextSource(fs)
	if err := fs.Parse(args); err != nil {
		return Result{}, err
	}
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	return Result{Config: c, PrintConfig: printCfg}, nil
}

func applyYAML(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "config" || k == "print-config" || fs.Lookup(k) == nil {
			return fmt.Errorf("config file %s: unknown key %q", path, k)
		}
		v := m[k]
		if list, ok := v.([]any); ok {
			if _, repeatable := fs.Lookup(k).Value.(interface{ repeatable() }); repeatable {
				for _, item := range list {
					if err := fs.Set(k, fmt.Sprint(item)); err != nil {
						return fmt.Errorf("config file %s: key %q: %w", path, k, err)
					}
				}
				continue
			}
		}
		switch v.(type) {
		case map[string]any, []any:
			return fmt.Errorf("config file %s: key %q: want a scalar", path, k)
		}
		s := fmt.Sprint(v)
		if v == nil {
			s = ""
		}
		if err := fs.Set(k, s); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", path, k, err)
		}
	}
	return nil
}

func usage(out io.Writer, header string, fs *flag.FlagSet) {
	_, _ = fmt.Fprint(out, header+`
Every flag can also be set by an environment variable (shown below) or by a
key of the same name in the YAML file given by --config. Precedence:
flags, then environment, then the YAML file, then defaults.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		_, _ = fmt.Fprintf(out, "%s\n      %s\n      env %s", line, help, EnvName(f.Name))
		if f.DefValue != "" && f.DefValue != "false" {
			_, _ = fmt.Fprintf(out, ", default %q", f.DefValue)
		}
		_, _ = fmt.Fprintln(out)
	})
}

// explainFlagError rewrites the flag package's parse errors: an unknown
// flag names the closest known one, a duration without a unit says so.
func explainFlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		if best := closestFlag(fs, name); best != "" {
			return fmt.Errorf("unknown flag --%s (did you mean --%s?); --help lists them", name, best)
		}
		return fmt.Errorf("unknown flag --%s; --help lists them", name)
	}
	// invalid value "5" for flag -prune-interval: parse error
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		val, after, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `" for flag -`)
		name, reason, _ := strings.Cut(after, ":")
		if f := fs.Lookup(name); f != nil {
			if _, custom := f.Value.(interface{ repeatable() }); custom {
				return fmt.Errorf("--%s %q:%s", name, val, reason)
			}
			if _, isDur := f.Value.(interface{ Get() any }).Get().(time.Duration); isDur {
				if _, perr := strconv.ParseFloat(val, 64); perr == nil {
					return fmt.Errorf("--%s %s: a duration needs a unit, e.g. %sm or %ss", name, val, val, val)
				}
				return fmt.Errorf("--%s %q: want a duration like 30s, 5m or 1h", name, val)
			}
			return fmt.Errorf("--%s %q: want %s (default %s)", name, val, kindOf(f), f.DefValue)
		}
	}
	return err
}

func kindOf(f *flag.Flag) string {
	switch f.Value.(interface{ Get() any }).Get().(type) {
	case bool:
		return "true or false"
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	}
	return "a value"
}

// closestFlag is the known flag nearest to name (edit distance ≤ 3).
func closestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 4
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
